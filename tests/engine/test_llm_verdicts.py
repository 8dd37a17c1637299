"""Language-model verdicts that cannot be wrong silently: a self-explanation reply is judged
only when it is the object asked for (engine.selfexplain.replies); IG, DeepLift and GradientSHAP check completeness
and IG raises its steps until its scores add up (engine.importance.completeness); prompt specs say what the model
reads (the plain template's newline, label words that do not start a new word)."""
from __future__ import annotations

import copy

import pytest
import torch
from tiny_lms import SENTIMENT_PROMPT, FakeGenerator, tiny_llama

from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier
from engine.selfexplain import explain_one
from engine.selfexplain.parsing import parse_attribution, parse_counterfactual, parse_redaction
from engine.selfexplain.replies import check_rewrite, is_label_statement

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)

TEXT = "a gripping , funny and moving film"
LABELS = ["negative", "positive", "Negative", "Positive", "neutral", "unknown"]
REFUSAL = "I'm sorry, but I cannot rewrite this text."

NOT_A_REWRITE = {
    "gibberish": "asdf qwer ###",
    "bare label": "positive",
    "statement about the label": "The sentiment is not positive.",
    "negated label": "not negative",
    "empty": "",
    "whitespace": "  \n\t ",
    "refusal": REFUSAL,
    "the input echoed": TEXT,
}
REWRITES = ["a dull , tedious and plodding film", "Here is the rewritten text:\n\na boring , unfunny and flat film",
            'Rewritten text: "a gripping , funny and moving film ? no , a dull one"']


# -- the rule, on the parsers ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(NOT_A_REWRITE))
def test_counterfactual_reply_that_is_not_a_rewrite_of_the_input_is_not_parsable(case):
    value, why = parse_counterfactual(NOT_A_REWRITE[case], TEXT, LABELS)
    assert value is None and why, case


@pytest.mark.parametrize("reply", REWRITES)
def test_counterfactual_rewrites_of_the_input_are_still_read(reply):
    value, why = parse_counterfactual(reply, TEXT, LABELS)
    assert value is not None and why == "", why


def test_counterfactual_rule_bounds_length_and_kept_words():
    """A rewrite keeps at least 30% of the input's words and stays within a factor of 3 of its length."""
    long_input = "the plot is thin but the actors carry it with charm and wit to the very end"
    assert not check_rewrite("it is bad", long_input)[0]                     # 3 words against 17
    assert not check_rewrite("an entirely different sentence about cooking pasta at home tonight", TEXT)[0]
    assert not check_rewrite(" ".join([TEXT + " but dull"] * 4), TEXT)[0]   # 36 words against 7
    assert check_rewrite("the plot is thin and the actors cannot carry it to the end", long_input)[0]


def test_label_statements_are_recognised_but_a_review_using_a_label_word_is_not_one():
    assert is_label_statement("The sentiment is not positive.", LABELS)
    assert is_label_statement("Negative", LABELS)
    assert not is_label_statement("a positive surprise of a film", LABELS)
    assert not is_label_statement("asdf qwer", LABELS)


@pytest.mark.parametrize("case", list(NOT_A_REWRITE))
def test_redaction_reply_that_is_not_a_redacted_copy_is_not_parsable(case):
    assert parse_redaction(NOT_A_REWRITE[case], source=TEXT, labels=LABELS)[0] is None, case


@pytest.mark.parametrize("reply", ["[REDACTED]", "[REDACTED] qwer asdf zxcv [REDACTED] uiop hjkl",
                                   "The sentiment is [REDACTED]."])
def test_redaction_reply_must_be_made_of_the_inputs_words(reply):
    assert parse_redaction(reply, source=TEXT, labels=LABELS)[0] is None


def test_a_genuine_redaction_is_still_read():
    assert parse_redaction("a gripping , [REDACTED] and [REDACTED] film", source=TEXT, labels=LABELS)[0] == \
        "a gripping , [REDACTED] and [REDACTED] film"


@pytest.mark.parametrize("case", list(NOT_A_REWRITE))
def test_attribution_reply_that_is_not_a_choice_of_the_inputs_words_is_not_parsable(case):
    assert parse_attribution(NOT_A_REWRITE[case], TEXT)[0] is None, case


def test_attribution_echo_of_a_short_input_is_not_parsable_but_a_choice_of_its_words_is():
    short = "a gorgeous , witty film"
    assert parse_attribution("a gorgeous, witty film", short)[0] is None     # every word named
    assert parse_attribution("gorgeous, witty", short)[0] == ["gorgeous", "witty"]


# -- the rule, through the whole check on a fake generator -----------------------------------------------------
@pytest.fixture(scope="module")
def bert_tokenizer():
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    return AutoTokenizer.from_pretrained(resolve_encoder("tiny"))


def _tiny_prompted(tokenizer) -> PromptedClassifier:
    tok = copy.deepcopy(tokenizer)
    model = tiny_llama(tok)
    spec = PromptSpec.from_dict(SENTIMENT_PROMPT)
    return PromptedClassifier(model, tok, spec, max_length=96)


@pytest.mark.parametrize("kind", ["counterfactual", "attribution", "redaction"])
@pytest.mark.parametrize("case", list(NOT_A_REWRITE))
def test_a_reply_that_is_not_the_requested_object_is_never_judged(bert_tokenizer, kind, case):
    """Before the rule, "positive", "not negative" or "asdf qwer ###" were classified again and could be judged
    faithful; now every such reply is "not parsable" and never classified again."""
    clf = _tiny_prompted(bert_tokenizer)
    gen = FakeGenerator(NOT_A_REWRITE[case])
    r = explain_one(clf, gen, kind, TEXT, label="positive", only_correct=False)
    assert gen.calls == 1
    assert r.verdict == "not parsable" and r.reason and r.reclassification is None, (kind, case, r.reason)


@pytest.mark.parametrize("kind, reply", [("counterfactual", "a dull , tedious and plodding film"),
                                         ("attribution", "1. funny\n2. gripping"),
                                         ("redaction", "a gripping , [REDACTED] and [REDACTED] film")])
def test_legitimate_replies_are_still_classified_again_and_judged(bert_tokenizer, kind, reply):
    clf = _tiny_prompted(bert_tokenizer)
    r = explain_one(clf, FakeGenerator(reply), kind, TEXT, label="positive", only_correct=False)
    assert r.verdict in ("faithful", "unfaithful") and r.reclassification is not None, r.reason


# -- completeness: IG converges, DeepLift and GradientSHAP check --------------------------------------------------
IG_TEXTS = ["the movie was really good and fun", "this film was so dull", "a gripping , funny and moving film"]


def test_ig_raises_its_steps_until_the_scores_add_up_and_records_what_it_used(toy_classifier):
    """With 1 midpoint step the gap misses the tolerance; the check recomputes those inputs with Gauss-Legendre
    at 3, 9, 27 ... steps until |gap| <= max(5% |f(x) - f(b)|, 0.01), and records the steps, the rule, the first
    and final gap. Inputs within the tolerance at once keep the configured rule's scores exactly."""
    from engine.importance import get_explainer
    from engine.importance.completeness import completeness_warning

    batch = toy_classifier.batch(IG_TEXTS)
    fixed = get_explainer("ig-sign", toy_classifier, steps=1, max_steps=1, memo=False).attribute(batch)
    conv = get_explainer("ig-sign", toy_classifier, steps=1, max_steps=81, memo=False).attribute(batch)
    fx = fixed.extras
    assert not fx["complete"].all(), "the test needs an input that 1 step cannot integrate"
    assert fx["steps_used"].tolist() == [1] * len(IG_TEXTS)
    # without escalation a miss is reported with its fix
    missed = int((~fx["complete"]).nonzero()[0])
    warning = completeness_warning("ig-sign", fx, missed)
    assert "max_steps" in warning and "1 midpoint steps" in warning
    e = conv.extras
    assert e["complete"].all(), e
    torch.testing.assert_close(e["initial_gap"], fx["completeness_gap"])
    for i in range(len(IG_TEXTS)):
        assert completeness_warning("ig-sign", e, i) is None
        if bool(fx["complete"][i]):
            assert e["steps_used"][i] == 1 and torch.equal(conv.scores[i], fixed.scores[i])
        else:
            assert e["steps_used"][i] in (3, 9, 27, 81) and e["rule_used"][i] == "gausslegendre"
        # the cost: every attempt's path points (1, then 3, 9, ... up to the steps used)
        assert e["path_points"][i] == 1 + sum(k for k in (3, 9, 27, 81) if k <= e["steps_used"][i])
        # the recorded gap is the scores' own
        delta = e["f_input"][i] - e["f_baseline"][i]
        assert abs(float(conv.scores[i].double().sum() - delta - e["completeness_gap"][i])) < 1e-4


def test_ig_default_on_an_encoder_that_converges_keeps_the_fixed_rule_scores(toy_classifier):
    """The default check changes nothing where 20 midpoint steps are within the tolerance (the encoders): the
    scores equal those with the escalation turned off (max_steps=steps), hence captum's riemann_middle."""
    from engine.importance import get_explainer

    batch = toy_classifier.batch(IG_TEXTS)
    default = get_explainer("ig-sign", toy_classifier, memo=False).attribute(batch)
    off = get_explainer("ig-sign", toy_classifier, max_steps=20, memo=False).attribute(batch)
    assert default.extras["complete"].all() and default.extras["steps_used"].tolist() == [20] * len(IG_TEXTS)
    assert torch.equal(default.scores, off.scores)


@pytest.mark.parametrize("measure, options", [("deeplift", {}), ("gradient-shap", {"n_samples": 8})])
def test_deeplift_and_gradient_shap_report_their_completeness_gap(toy_classifier, measure, options):
    """gap = sum of the scores - (f_c(x) - f_c(b)) with f_c(x) the classifier's own logit; `complete` says whether it
    is within the stated tolerance (gradient-shap: 3 standard errors of its sample mean, at least 0.01)."""
    from engine.importance import get_explainer
    from engine.importance.completeness import ABSOLUTE_TOLERANCE, completeness_warning

    batch = toy_classifier.batch(IG_TEXTS)
    imp = get_explainer(measure, toy_classifier, memo=False, **options).attribute(batch)
    e = imp.extras
    with torch.no_grad():
        f_x = toy_classifier.logits(batch).gather(1, imp.target.to(batch.device)[:, None]).squeeze(1).double()
    torch.testing.assert_close(e["f_input"], f_x.cpu(), atol=1e-5, rtol=0)  # an Importance's extras are on the CPU
    torch.testing.assert_close(imp.scores.double().sum(1) - (e["f_input"] - e["f_baseline"]), e["completeness_gap"],
                               atol=1e-4, rtol=0)
    assert (e["allowed_gap"] >= ABSOLUTE_TOLERANCE).all()
    assert e["complete"].tolist() == (e["completeness_gap"].abs() <= e["allowed_gap"]).tolist()
    for i in range(len(IG_TEXTS)):
        warning = completeness_warning(measure, e, i)
        assert (warning is None) == bool(e["complete"][i])


def test_scores_that_do_not_add_up_are_warned_in_the_cli_and_every_export(toy_classifier, models_cache, capsys):
    """IG with one step and no budget to raise it misses the tolerance: `explain` prints a warning naming the fix,
    and the JSON, CSV, HTML and LaTeX exports carry it; with the default budget there is no warning."""
    import json

    from engine.cli import main
    from engine.explain import explain_text
    from engine.export import explanation_record, write
    from engine.models import save_classifier

    save_classifier(toy_classifier, "toy-verdicts")
    text = "a gripping , funny and moving film"
    # Zero tolerance: a single step is then never within it (a nonzero gap always exceeds 0), where the default 5%
    # depended on the model: one step could land within it by chance, and the test skipped.
    coarse = {"ig-sign": {"steps": 1, "max_steps": 1, "tolerance": 0.0, "abs_tolerance": 0.0}}
    assert not explain_text(toy_classifier, text, measures=["ig-sign"], options=coarse).extras["ig-sign"]["complete"][0]
    assert main(["explain", "--model", "toy-verdicts", "--text", text, "--measure", "ig-sign",
                 "--option", "steps=1", "--option", "max_steps=1", "--option", "tolerance=0",
                 "--option", "abs_tolerance=0"]) == 0
    out = capsys.readouterr().out
    assert "warning: ig-sign: the scores do not add up" in out and "max_steps" in out
    result = explain_text(toy_classifier, text, measures=["ig-sign"], options=coarse)
    record = explanation_record(result, toy_classifier)
    assert record["measures"]["ig-sign"]["completeness"]["complete"] is False
    assert record["measures"]["ig-sign"]["completeness"]["steps_used"] == 1
    assert len(record["warnings"]) == 1 and "max_steps" in record["warnings"][0]
    assert json.loads(write(record, "json"))["warnings"] == record["warnings"]
    assert record["warnings"][0] in write(record, "csv")
    assert 'class="warning"' in write(record, "html")
    assert "% Warning: ig-sign" in write(record, "latex")
    fine = explanation_record(explain_text(toy_classifier, text, measures=["ig-sign"]), toy_classifier)
    assert fine["warnings"] == [] and fine["measures"]["ig-sign"]["completeness"]["complete"] is True


# -- prompt specs that say what they do ------------------------------------------------------------------------
class _Weightless(torch.nn.Module):
    """Just the embedding table a PromptedClassifier asks for (rendering and tokenising need no weights)."""

    def __init__(self, vocabulary: int):
        super().__init__()
        self.table = torch.nn.Embedding(vocabulary, 1)

    def get_input_embeddings(self):
        return self.table


@pytest.fixture(scope="module")
def smollm2_tokenizer(converted_smollm2):
    """SmolLM2's tokenizer from the per-machine converted folder (converting into the checkout's models_cache/ here,
    as this fixture did, cost about 20 s of a fresh clone's suite and wrote outside the test's folders)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(converted_smollm2))


def _plain(words, prefix="The review was"):
    return PromptSpec.from_dict({"instruction": "Rate the review.", "input_format": "Review: {input}",
                                 "template": "plain", "answer_prefix": prefix,
                                 "verbalizer": {"negative": [words[0]], "positive": [words[1]]}})


def test_a_label_word_glued_to_the_answer_prefix_warns_with_the_tokens_the_model_reads(smollm2_tokenizer):
    """'very bad' after 'The review was' reads 'wasvery': accepted, but a PromptSpecWarning names the token
    sequence; the same words with their leading space give no warning."""
    from engine.models.prompt_checks import PromptSpecWarning

    with pytest.warns(PromptSpecWarning, match="wasvery") as caught:
        clf = PromptedClassifier(_Weightless(len(smollm2_tokenizer)), smollm2_tokenizer, _plain(["very bad", "very good"]),
                                 max_length=512)
    assert len(clf.prompt_warnings) == 2 and len(caught) == 2
    tokens = smollm2_tokenizer.convert_ids_to_tokens(
        smollm2_tokenizer(clf.render("x")[0] + "very bad", add_special_tokens=False)["input_ids"])
    assert str(tokens[-3:]) in clf.prompt_warnings[0]  # the prompt's last token, then the word's
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", PromptSpecWarning)
        spaced = PromptedClassifier(_Weightless(len(smollm2_tokenizer)), smollm2_tokenizer,
                                    _plain([" very bad", " very good"]), max_length=512)
    assert spaced.prompt_warnings == []


def test_the_plain_template_renders_what_its_stated_layout_says(smollm2_tokenizer):
    """The plain template's separators are the ones template_layout states: a blank line between the parts and
    one newline between input_format and answer_prefix (the template's, not the spec's)."""
    from engine.models.prompt_checks import template_layout

    spec = _plain([" bad", " good"])
    clf = PromptedClassifier(_Weightless(len(smollm2_tokenizer)), smollm2_tokenizer, spec, max_length=512)
    bos = smollm2_tokenizer.bos_token or ""
    assert clf.render("a fine film")[0] == bos + "Rate the review.\n\nReview: a fine film\nThe review was"
    assert "input_format + '\\n' + answer_prefix" in template_layout(spec)


def test_the_shipped_smollm2_prompt_renders_as_before_and_warns_of_nothing(smollm2_tokenizer):
    """smollm2-rt-prompt's render is unchanged by the checks (its shipped numbers stand): the chat template ends
    with 'assistant' and a newline, so its label words start a new word."""
    import warnings

    from engine.models.prompt_checks import PromptSpecWarning
    from engine.models.prompt_spec import sentiment_prompt

    with warnings.catch_warnings():
        warnings.simplefilter("error", PromptSpecWarning)
        clf = PromptedClassifier(_Weightless(len(smollm2_tokenizer)), smollm2_tokenizer, sentiment_prompt(), max_length=512)
    prompt = clf.render("a fine film")[0]
    assert prompt.endswith("<|im_start|>assistant\n") and clf.prompt_warnings == []


def test_models_add_and_the_prompt_editor_show_the_glued_label_word_warning(tmp_path, models_cache, smollm2_tokenizer,
                                                                            capsys):
    import json

    import transformers

    from app.prompt_editor import preview
    from engine.cli import main

    spec = _plain(["very bad", "very good"])
    view = preview(smollm2_tokenizer, spec)
    assert len(view.warnings) == 2 and "wasvery" in view.warnings[0] and "answer_prefix" in view.layout
    config = transformers.LlamaConfig(vocab_size=len(smollm2_tokenizer), hidden_size=16, intermediate_size=32,
                                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    folder = tmp_path / "tiny-llama"
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    smollm2_tokenizer.save_pretrained(folder)
    path = tmp_path / "prompt.json"
    path.write_text(json.dumps(spec.to_dict()))
    assert main(["models", "add", str(folder), "--prompt", str(path), "--id", "glued-prompt"]) == 0
    out = capsys.readouterr().out
    assert out.count("warning: label word") == 2 and "wasvery" in out and "plain template" in out


def test_a_curves_completeness_meter_counts_the_explanations_that_missed_and_says_the_fix(toy_classifier):
    """What a benchmark cell's provenance records (engine.faithfulness.benchmark wraps its explainer so): every
    explanation checked, how many missed the tolerance, the largest gap and steps, and the warning when some missed."""
    from engine.importance import get_explainer
    from engine.importance.completeness import CompletenessMeter

    batch = toy_classifier.batch(IG_TEXTS)
    coarse = get_explainer("ig-sign", toy_classifier, steps=1, max_steps=1, memo=False)
    meter = CompletenessMeter("ig-sign")
    coarse.attribute = meter.wrap(coarse.attribute)
    first = coarse.attribute(batch)
    summary = meter.summary()
    missed = int((~first.extras["complete"]).sum())
    assert summary["explanations"] == len(IG_TEXTS) and summary["incomplete"] == missed >= 1
    assert summary["max_steps_used"] == 1 and "max_steps" in summary["warning"]
    assert summary["max_abs_gap"] == pytest.approx(float(first.extras["completeness_gap"].abs().max()))
    fine = CompletenessMeter("ig-sign")
    explainer = get_explainer("ig-sign", toy_classifier, memo=False)
    explainer.attribute = fine.wrap(explainer.attribute)
    explainer.attribute(batch)
    assert fine.summary()["incomplete"] == 0 and "warning" not in fine.summary()
    assert CompletenessMeter("loo-sign").summary() is None


def test_explain_page_warns_next_to_a_heatmap_whose_scores_do_not_add_up(models_cache, toy_classifier, monkeypatch):
    """With IG's defaults set to one step and no budget (monkeypatched: the page uses the defaults), the Explain
    page shows the completeness gap, the steps and a warning naming the fix beside ig-sign's heatmap; with the
    real defaults it shows the gap and no warning."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from engine.explain import explain_text
    from engine.importance.integrated_gradients import IntegratedGradientsSign
    from engine.models import save_classifier

    text = "the acting was truly bad and the story poor"
    save_classifier(toy_classifier, "toy-app")
    main = str(Path(__file__).resolve().parents[2] / "app" / "main.py")

    def explain_page():
        at = AppTest.from_file(main, default_timeout=120)
        at.run(timeout=120)
        at.switch_page(str(Path(main).parent.parent / "pages" / "explain.py")).run(timeout=120)  # the app opens on home
        at.multiselect(key="explain_measures").set_value(["ig-sign"])
        at.text_area(key="explain_text").input(text)
        at.button[0].click()
        at.run(timeout=120)
        assert not at.exception, [e.message for e in at.exception]
        return at

    at = explain_page()
    assert any("Completeness gap" in c.value and "20 midpoint steps" in c.value for c in at.caption)
    assert not [w for w in at.warning if "do not add up" in w.value]
    # zero tolerance: one step never meets it (with the default 5% it could by chance, and the test skipped)
    monkeypatch.setattr(IntegratedGradientsSign, "defaults",
                        {**IntegratedGradientsSign.defaults, "steps": 1, "max_steps": 1, "tolerance": 0.0,
                         "abs_tolerance": 0.0})
    assert not explain_text(toy_classifier, text, measures=["ig-sign"]).extras["ig-sign"]["complete"][0]
    at = explain_page()
    warnings = [w.value for w in at.warning if "do not add up" in w.value]
    assert len(warnings) == 1 and "ig-sign" in warnings[0] and "max_steps" in warnings[0]

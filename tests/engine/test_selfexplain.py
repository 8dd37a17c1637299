"""Self-explanations of prompted language models (engine.selfexplain, docs/methods.md#self-explanations): the answer parsers,
the verdicts, generation (KV cache, streaming, cancellation, the on-disk cache) and the whole path on random-weight
tiny Llama models built here with the packaged `tiny` BERT tokenizer (plain-text prompts)."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from engine.errors import Cancelled
from engine.importance import get_explainer
from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier
from engine.selfexplain import (
    DecodingSettings,
    GenerationCache,
    GenerationCancelled,
    Generator,
    explain_one,
    judge_classifier,
    self_explain,
    summarise,
    verdict,
)
from engine.selfexplain.parsing import (
    explanation_request,
    parse_attribution,
    parse_counterfactual,
    parse_redaction,
    redact_words,
)

TEXT = "a gripping , funny and moving film"


# -- parsing -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer, expected", [
    ("A dull and tedious film.", "A dull and tedious film."),
    ("Here is the rewritten text:\n\nA dull and tedious film.", "A dull and tedious film."),
    ('Sure! "A dull and tedious film."', None),  # "Sure! ..." on one line is a preamble line: nothing left
    ('Rewritten text: "A dull and tedious film."', "A dull and tedious film."),
    ('Reply: "A dull and tedious film."', "A dull and tedious film."),  # SmolLM2 echoes the request's "Reply"
    ("**A dull and tedious film.**<br />\n\nNote: I changed two words.", "A dull and tedious film."),
    ("“A dull film.”", "A dull film."),
    ("I'm sorry, I cannot rewrite this text.", None),
    ("   ", None),
    ("Here is the edited text:", None),
])
def test_counterfactual_answers_give_the_edited_text_without_preamble_markup_or_quotes(answer, expected):
    assert parse_counterfactual(answer)[0] == expected


@pytest.mark.parametrize("answer, expected", [
    ("1. funny\n2. gripping", ["funny", "gripping"]),
    ("Here are the words:\n- **funny** - shows that the film is entertaining\n- 'moving'", ["funny", "moving"]),
    ("funny, gripping, moving", ["funny", "gripping", "moving"]),
    ('The most important words are "funny" and \'gripping\' here.', ["funny", "gripping"]),
    ("The words “and moving” matter; it's the film's tone.", ["and moving"]),  # phrases; apostrophes are no quotes
    ('The words for the sentiment of "gripping , funny" are "funny" and "film".', ["funny", "film"]),  # not the subject
    ("A gripping and funny and moving film indeed.", None),  # a sentence echoed back is not a list of words
    ("funny\nGripping\nfunny", ["funny", "Gripping"]),                  # duplicates dropped, case kept
    ("1. funny\n2. hilarious", ["funny"]),                               # words not in the text are dropped
    ("1. hilarious\n2. thrilling", None),                                # none in the text: not parsable
    ("As an AI, I cannot tell.", None),
    ("", None),
])
def test_attribution_answers_give_the_named_words_that_occur_in_the_text(answer, expected):
    assert parse_attribution(answer, TEXT)[0] == expected


@pytest.mark.parametrize("answer, expected", [
    ("a gripping , [REDACTED] and moving film", "a gripping , [REDACTED] and moving film"),
    ("Redacted text: a [redacted] , [ REDACTED ] and moving film", "a [REDACTED] , [REDACTED] and moving film"),
    ("a gripping , funny and moving film", None),  # redacts nothing
    ("I'm sorry, but I can't do that.", None),
])
def test_redaction_answers_normalise_the_mask_and_must_redact_something(answer, expected):
    assert parse_redaction(answer)[0] == expected


def test_redacting_named_words_replaces_every_whole_word_occurrence_and_is_idempotent():
    text = "Funny? funny, not funnyish. [REDACTED] redacted"
    once = redact_words(text, ["funny", "redacted"])
    assert once == "[REDACTED]? [REDACTED], not funnyish. [REDACTED] [REDACTED]"
    assert redact_words(once, ["funny", "redacted"]) == once


def test_requests_name_the_target_and_the_mask_and_hold_the_text():
    assert "negative" in explanation_request("counterfactual", TEXT, target="negative")
    assert "[REMOVED]" in explanation_request("redaction", TEXT, mask="[REMOVED]")
    assert all(explanation_request(k, TEXT, target="x").endswith(TEXT) for k in ("counterfactual", "attribution", "redaction"))
    with pytest.raises(ValueError):
        explanation_request("counterfactual", TEXT)


# -- verdicts ------------------------------------------------------------------------------------------------
def test_verdict_counterfactual_needs_the_target_and_redactions_need_an_abstention():
    ab = ("neutral", "unknown")
    assert verdict("counterfactual", "positive", "negative", "negative", ab) == "faithful"
    assert verdict("counterfactual", "positive", "neutral", "negative", ab) == "unfaithful"
    for kind in ("attribution", "redaction"):
        assert verdict(kind, "positive", "neutral", None, ab) == "faithful"
        assert verdict(kind, "positive", "negative", None, ab) == "unfaithful"  # the paper's rule: flipping is not abstaining
        assert verdict(kind, "positive", "negative", None, ()) == "faithful"   # without abstention words: any change
        assert verdict(kind, "positive", "positive", None, ()) == "unfaithful"


# -- tiny models ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bert_tokenizer():
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    return AutoTokenizer.from_pretrained(resolve_encoder("tiny"))


def tiny_llama(tokenizer, seed: int = 0):
    import transformers

    config = transformers.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, pad_token_id=tokenizer.pad_token_id,
                                      bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with torch.no_grad():  # larger weights than the init's, so the random model's answers vary
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(10)
    return model.eval()


def prompted(tokenizer, model=None) -> PromptedClassifier:
    spec = PromptSpec.from_dict({"instruction": "is the review positive or negative ?", "input_format": "review : {input}",
                                 "template": "plain", "answer_prefix": "answer :",
                                 "verbalizer": {"negative": ["bad"], "positive": ["good"]}})
    tok = copy.deepcopy(tokenizer)
    return PromptedClassifier(model if model is not None else tiny_llama(tok), tok, spec, max_length=96)


def always_says(tokenizer, word: str, noise: float = 0.0) -> PromptedClassifier:
    """A tiny Llama whose LM head always prefers `word` (zero weights, a bias): greedy generation writes it again
    and again, through the real `generate` path; among the label words "good" comes first, so it always
    classifies as positive. noise: std of random head weights, small enough to keep the answer, large enough to
    make class probabilities depend on the input."""
    clf = prompted(tokenizer)
    head = torch.nn.Linear(32, len(clf.tokenizer), bias=True)
    with torch.no_grad():
        torch.manual_seed(0)
        head.weight.normal_(0.0, noise) if noise else head.weight.zero_()
        head.bias.zero_()
        head.bias[clf.tokenizer.convert_tokens_to_ids(word)] = 5.0
        head.bias[clf.tokenizer.convert_tokens_to_ids("good")] = 4.0
    clf.model.lm_head = head
    return clf


@pytest.fixture()
def cache(tmp_path):
    return GenerationCache(tmp_path / "generations.sqlite3")


def test_greedy_generation_with_the_kv_cache_equals_recomputing_every_step(bert_tokenizer, cache):
    """generate (use_cache=True) = an argmax loop that runs the whole sequence again at each step."""
    clf = prompted(bert_tokenizer)
    gen = Generator(clf, DecodingSettings(max_new_tokens=8), cache=cache)
    prompt = gen.chat_prompt("say something")
    text = gen.generate(prompt)
    ids = clf.tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        for _ in range(8):
            nxt = clf.model(input_ids=ids, use_cache=False).logits[0, -1].argmax()
            ids = torch.cat([ids, nxt.view(1, 1)], 1)
            if int(nxt) == clf.model.generation_config.eos_token_id:
                break
    n = len(clf.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert text == clf.tokenizer.decode(ids[0, n:], skip_special_tokens=True)


def test_streamed_pieces_make_up_the_answer_and_a_rerun_generates_nothing(bert_tokenizer, cache):
    clf = prompted(bert_tokenizer)
    gen = Generator(clf, DecodingSettings(max_new_tokens=12), cache=cache)
    pieces = []
    first = gen.generate("a prompt", on_text=pieces.append)
    assert len(pieces) >= 2 and "".join(pieces) == first and gen.generated == 1 and not gen.last_cached
    again = Generator(clf, DecodingSettings(max_new_tokens=12), cache=GenerationCache(cache.path))
    assert again.generate("a prompt") == first and again.generated == 0 and again.last_cached
    # another prompt, other decoding settings or other weights are other keys
    assert Generator(clf, DecodingSettings(max_new_tokens=11), cache=cache).generate("a prompt") is not None
    other = prompted(bert_tokenizer, tiny_llama(bert_tokenizer, seed=1))
    other_gen = Generator(other, DecodingSettings(max_new_tokens=12), cache=cache)
    other_gen.generate("a prompt")
    assert other_gen.generated == 1 and len(cache) == 3


def test_self_explain_twice_generates_only_the_first_time(bert_tokenizer, cache):
    """A whole self-explanation run repeated with the same model, prompts and settings reads every answer from
    the SQLite cache: zero generate calls the second time, the same records."""
    from types import SimpleNamespace

    clf = prompted(bert_tokenizer)
    examples = [SimpleNamespace(primary=TEXT, label=None), SimpleNamespace(primary="dull and far too long", label=None)]
    runs = []
    for _ in range(2):
        gen = Generator(clf, DecodingSettings(max_new_tokens=6), cache=GenerationCache(cache.path))
        runs.append((self_explain(clf, examples, "redaction", generator=gen), gen.generated))
    (first, n1), (second, n2) = runs
    assert n1 == 2 and n2 == 0
    assert [r.answer for r in first] == [r.answer for r in second] and all(r.cached for r in second)


def test_cancelling_stops_generation_and_caches_nothing(bert_tokenizer, cache):
    clf = prompted(bert_tokenizer)
    gen = Generator(clf, DecodingSettings(max_new_tokens=50), cache=cache)
    calls = []

    def stop_after_three():
        calls.append(1)
        return len(calls) > 3

    pieces = []
    with pytest.raises(GenerationCancelled):
        gen.generate("a prompt", on_text=pieces.append, should_stop=stop_after_three)
    assert len(calls) <= 6 and len(cache) == 0
    assert isinstance(GenerationCancelled("x"), Cancelled)  # the CLI's "interrupted" path catches it


def test_attribution_end_to_end_names_a_word_redacts_it_and_classifies_again(bert_tokenizer, cache):
    """The real path (chat prompt, greedy KV-cache generation, parsing, redaction, re-classification) on a tiny
    Llama that always answers "funny": every intermediate text is kept and the verdict follows the rule."""
    clf = always_says(bert_tokenizer, "funny")
    gen = Generator(clf, DecodingSettings(max_new_tokens=1), cache=cache)
    r = explain_one(clf, gen, "attribution", TEXT)
    assert r.prompt.endswith(TEXT + "\n\n") and "important" in r.request
    assert r.answer == "funny" and r.explanation == ["funny"]
    assert r.edited_text == "a gripping , [REDACTED] and moving film"
    assert set(r.reprobabilities) == {"negative", "positive", "neutral", "unknown"}
    assert r.prediction == r.reclassification == "positive" and r.verdict == "unfaithful"
    r2 = explain_one(clf, gen, "counterfactual", TEXT, label="positive")
    assert r2.correct and r2.target == "negative" and r2.request.count("negative") == 1
    # one word of a 7-word input is not a rewrite of it (engine.selfexplain.replies): not parsable, never judged
    assert r2.answer == "funny" and r2.edited_text is None and r2.verdict == "not parsable" and "words" in r2.reason
    skipped = explain_one(clf, gen, "counterfactual", TEXT, label="negative")
    assert skipped.verdict == "skipped" and skipped.answer is None  # misclassified inputs are not explained
    r3 = explain_one(clf, gen, "redaction", TEXT)
    assert r3.verdict == "not parsable" and "redacts nothing" in r3.reason


def test_summary_shares_add_up_and_follow_the_papers_faithfulness():
    from engine.selfexplain import SelfExplanation

    def rec(v, correct=True):
        return SelfExplanation(index=0, kind="redaction", text="t", label="positive", prediction="positive",
                               probabilities={}, correct=correct, verdict=v,
                               reclassification={"faithful": "neutral", "unfaithful": "positive"}.get(v))

    records = [rec("faithful")] * 3 + [rec("unfaithful")] * 1 + [rec("not parsable")] * 4 + [rec("skipped", False)] * 2
    s = summarise(records)
    assert s["n"] == 10 and s["n_correct"] == 8 and s["accuracy"] == 0.8 and s["n_explained"] == 8
    assert s["faithful"] + s["unfaithful"] + s["not parsable"] == pytest.approx(1.0)
    assert s["faithfulness"] == 0.75 and s["changed"] == 3  # abstaining changes the class; staying positive does not
    lo, hi = s["faithful_ci"]
    assert lo < 3 / 8 < hi


# -- self-attribution as a measure -----------------------------------------------------------------------------
def test_self_attribution_scores_the_named_words_and_only_prompted_models_offer_it(bert_tokenizer, known_classifier):
    clf = always_says(bert_tokenizer, "funny")
    batch = clf.batch(TEXT)
    imp = get_explainer("self-attribution", clf, max_new_tokens=1).attribute(batch)
    named = [t for t, s in zip(clf.tokenizer.convert_ids_to_tokens(batch.input_ids[0]), imp.scores[0]) if s > 0]
    assert named == ["funny"] and imp.scores.max() == 1.0 and imp.extras["words"] == [["funny"]]
    assert (imp.scores[~imp.maskable] == 0).all()
    plain, _ = known_classifier([0.5, -0.5])
    ok, why = get_explainer("self-attribution", plain).supports()
    assert not ok and "prompted" in why


def test_self_attribution_in_recursive_masking_masks_the_named_word_first_and_asks_once(bert_tokenizer, cache):
    """Recursive masking with the LM's own attribution: the first token masked is the word it named, and the model
    is asked once per input (computed_once), not again on the masked input."""
    from engine.faithfulness.recursive import recursive_masking

    clf = always_says(bert_tokenizer, "funny")
    batch = clf.batch([TEXT, "dull , funny and long"])
    explainer = get_explainer("self-attribution", clf, max_new_tokens=1, memo=False)
    calls = []
    real = Generator.generate

    def counting(self, prompt, **kw):
        calls.append(prompt)
        return real(self, prompt, **kw)

    Generator.generate = counting
    try:
        result = recursive_masking(clf, explainer, batch, counts=(0, 1, 2))
    finally:
        Generator.generate = real
    assert len(calls) == 2
    step1 = result.steps[1].input_ids
    for row in range(2):
        masked = (step1[row] == clf.mask_token_id).nonzero().flatten().tolist()
        assert clf.tokenizer.convert_ids_to_tokens(batch.input_ids[row, masked].tolist()) == ["funny"]


# -- SmolLM2's tokenizer and chat template (byte-level BPE), and the real SmolLM2 --------------------------------
@pytest.fixture(scope="module")
def smollm2_tokenizer(converted_smollm2):
    """SmolLM2's tokenizer from the per-machine converted folder (`converted_smollm2`)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(converted_smollm2))


def test_chat_template_request_and_byte_level_word_spans_with_smollm2s_tokenizer(smollm2_tokenizer, cache):
    """With SmolLM2's chat template the request is one user turn ending in the generation prefix, and the named
    word is found on byte-level BPE tokens ("Ġfunny"): self-attribution scores exactly that token."""
    import transformers

    from engine.models.prompt_spec import sentiment_prompt

    config = transformers.LlamaConfig(vocab_size=len(smollm2_tokenizer), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    head = torch.nn.Linear(32, len(smollm2_tokenizer), bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[smollm2_tokenizer.convert_tokens_to_ids("Ġfunny")] = 5.0
    model.lm_head = head
    clf = PromptedClassifier(model, smollm2_tokenizer, sentiment_prompt(), max_length=256)
    judge = judge_classifier(clf)  # "Neutral" is two tokens: dropped, so classification stays one forward pass
    assert judge.classes == ("negative", "positive", "neutral", "unknown") and judge.single_token_words
    assert judge.spec.verbalizer["neutral"] == ["neutral"] and judge.spec.verbalizer["unknown"] == ["unknown", "Unknown"]
    gen = Generator(clf, DecodingSettings(max_new_tokens=2), cache=cache)
    prompt = gen.chat_prompt(explanation_request("attribution", TEXT))
    assert prompt.count("<|im_start|>user\n") == 1 and prompt.endswith("<|im_start|>assistant\n")
    batch = clf.batch(TEXT)
    imp = get_explainer("self-attribution", clf, max_new_tokens=1).attribute(batch)
    assert imp.extras["answers"] == [" funny"] and imp.extras["words"] == [["funny"]]
    scored = [t for t, s in zip(clf.tokenizer.convert_ids_to_tokens(batch.input_ids[0]), imp.scores[0]) if s > 0]
    assert scored == ["Ġfunny"]


def test_real_smollm2_counterfactual_on_one_sentence_and_a_rerun_from_the_cache(cache, models_cache, converted_smollm2):
    """SmolLM2-135M-Instruct itself (the per-machine conversion linked into this test's models cache; about 5 s on an
    idle machine): a counterfactual of one rt-style sentence goes through, keeps its texts, and a rerun generates
    nothing. (It ran only where an earlier test had converted SmolLM2 into the checkout's models_cache/.)"""
    from engine.models.llm_package import converted_dir

    converted_dir("smollm2").parent.mkdir(parents=True)
    converted_dir("smollm2").symlink_to(converted_smollm2, target_is_directory=True)
    from engine.models import load_classifier

    clf = load_classifier("smollm2-rt-prompt")
    text = "a gripping , funny and moving film ."
    gen = Generator(clf, DecodingSettings(max_new_tokens=16), cache=cache)
    r = explain_one(clf, gen, "counterfactual", text, only_correct=False, label="positive")
    assert r.target == "negative" and text in r.prompt and r.prompt.endswith("<|im_start|>assistant\n")
    assert r.answer and gen.generated == 1
    assert r.verdict in ("faithful", "unfaithful", "not parsable")
    again = Generator(clf, DecodingSettings(max_new_tokens=16), cache=GenerationCache(cache.path))
    r2 = explain_one(clf, again, "counterfactual", text, only_correct=False, label="positive")
    assert again.generated == 0 and r2.answer == r.answer and r2.verdict == r.verdict


def test_self_attribution_scores_feed_the_erasure_metrics_on_the_same_inputs(bert_tokenizer, cache):
    """The erasure metrics take the LM's named words like any measure's scores, on a prompted LM (class scores
    from the verbalizer, [REDACTED] written where a token is removed): removing the named word "funny" (the top
    20%) is what comprehensiveness@0.2 measures, p(c) of the input minus p(c) with [REDACTED] in its place."""
    from engine.faithfulness.erasure import erasure_metrics

    clf = always_says(bert_tokenizer, "funny", noise=0.1)
    batch = clf.batch([TEXT, "dull , funny and long"])
    imp = get_explainer("self-attribution", clf, max_new_tokens=1).attribute(batch)
    assert imp.extras["words"] == [["funny"], ["funny"]]
    result = erasure_metrics(clf, batch, imp.scores, metrics=["comprehensiveness", "sufficiency"], bins=(0.2,))
    assert set(result.values) >= {"comprehensiveness@0.2", "sufficiency@0.2"}
    assert all(np.isfinite(v).all() for v in result.values.values())
    with torch.no_grad():
        p = clf.logits(batch).softmax(-1)
        redacted = clf.batch([TEXT.replace("funny", "[REDACTED]"), "dull , [REDACTED] and long"])
        p_red = clf.logits(redacted).softmax(-1)
    c = p.argmax(-1)
    expected = (p[[0, 1], c] - p_red[[0, 1], c]).numpy()
    assert np.abs(expected).min() > 1e-4  # the redaction moves p(c): the check below is not 0 == 0
    assert np.allclose(result.values["comprehensiveness@0.2"], expected, atol=1e-5)


def test_cli_self_explain_prints_the_table_and_writes_its_own_store(bert_tokenizer, models_cache, tmp_path, monkeypatch,
                                                                    capsys):
    """`python -m engine self-explain` on a registered tiny prompted LM: the verdict table with intervals, and one
    cell with every record and its provenance under results/selfexplain/<run>/ (not a top-level curve run, which
    the Benchmarks page would read); a rerun generates nothing."""
    import json

    from engine.cli import main
    from engine.results.store import ResultsStore

    folder = tmp_path / "tiny-lm"
    tiny_llama(bert_tokenizer).save_pretrained(folder, safe_serialization=True)
    bert_tokenizer.save_pretrained(folder)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"instruction": "is the review positive or negative ?", "input_format": "review : {input}",
                                "template": "plain", "answer_prefix": "answer :",
                                "verbalizer": {"negative": ["bad"], "positive": ["good"]}}))
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("ENGINE_GENERATIONS_DB", str(tmp_path / "generations.sqlite3"))
    assert main(["models", "add", str(folder), "--prompt", str(spec), "--id", "tiny-lm"]) == 0
    argv = ["self-explain", "--model", "tiny-lm", "--dataset", "toy", "--kind", "attribution", "--limit", "4",
            "--max-new-tokens", "4", "--all-inputs", "--run", "t"]
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "attribution: 4 inputs" in out and "not parsable" in out and "95% CI" in out and "4 generated" in out
    assert ResultsStore(tmp_path / "results").runs() == []
    store = ResultsStore(tmp_path / "results" / "selfexplain")
    (recorded,) = store.provenance("t")
    assert recorded["provenance"]["command"].startswith("python -m engine self-explain")
    assert len(recorded["provenance"]["records"]) == 4 and all(r["answer"] is not None for r in recorded["provenance"]["records"])
    assert set(store.load("t")["metric"]) >= {"faithful", "unfaithful", "not parsable", "accuracy"}
    assert main(argv) == 0 and "0 generated" in capsys.readouterr().out


def test_published_sampling_is_seeded_and_cached_apart_from_greedy(bert_tokenizer, cache):
    """--decoding published (temperature 0.1, top-p 0.95, top-k 50, repetition penalty 1.2, seed 0): the same
    seed gives the same text, and it is cached under its own key, never served for a greedy request."""
    clf = prompted(bert_tokenizer)
    published = DecodingSettings.published(max_new_tokens=8)
    a = Generator(clf, published, cache=False).generate("a prompt")
    b = Generator(clf, published, cache=False).generate("a prompt")
    assert a == b
    Generator(clf, published, cache=cache).generate("a prompt")
    greedy = Generator(clf, DecodingSettings(max_new_tokens=8), cache=cache)
    greedy.generate("a prompt")
    assert greedy.generated == 1 and len(cache) == 2
    assert GenerationCache.key("m", "p", published) != GenerationCache.key("m", "p", DecodingSettings(max_new_tokens=8))

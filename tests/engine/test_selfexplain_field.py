"""The self-explanation tests the field now uses (docs/methods.md#self-explanation-tests-beyond-madsen-et-al): counterfactual insertion and CCT, CC-SHAP, biased
features, with the parsing discipline (a reply that is not an explanation is never judged), on a random-weight tiny
prompted LM with a fake generator (the replies are the test's), so each property is checked exactly."""
from __future__ import annotations

import copy
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tiny_lms import SENTIMENT_PROMPT, FakeGenerator, tiny_llama

from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier
from engine.selfexplain.biased import ADMITS, biased_classifier, biased_test, summarise_biased
from engine.selfexplain.ccshap import ccshap_test, explanation_values, masked_text, shapley_from_values
from engine.selfexplain.free_text import check_free_text, mentions, why_request
from engine.selfexplain.insertion import Insertion, cct, insert_word, insertion_test, summarise_insertions, vader_words

TEXT = "a gripping , funny and moving film"
LABELS = ["negative", "positive", "bad", "good"]


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    tok = AutoTokenizer.from_pretrained(resolve_encoder("tiny"))
    model = tiny_llama(tok)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(10)
    spec = PromptSpec.from_dict({**SENTIMENT_PROMPT, "replacement": "redacted"})
    return PromptedClassifier(model, copy.deepcopy(tok), spec, max_length=128)


NOT_AN_EXPLANATION = {"empty": "", "whitespace": "  \n ", "refusal": "I'm sorry, I cannot help with that.",
                      "label": "positive", "negated label": "The sentiment is not negative.", "echo": TEXT + "."}


@pytest.mark.parametrize("case", list(NOT_AN_EXPLANATION))
def test_a_reply_that_is_not_an_explanation_is_not_parsable(case):
    """Empty, refusal, a bare or negated label and the input echoed back are not explanations (an echo would
    'mention' every word of the input)."""
    ok, why = check_free_text(NOT_AN_EXPLANATION[case], TEXT, LABELS)
    assert not ok and why


def test_an_explanation_is_parsable_and_mentions_are_whole_words():
    ok, _ = check_free_text("It is positive because the film is called gripping and funny.", TEXT, LABELS)
    assert ok
    assert mentions("The word 'Gripping' decided it.", "gripping") and not mentions("ungripping stuff", "gripping")
    assert mentions("it was well made", "well made") and not mentions("it was made well", "well made")


GEMMA_LOOP = ("The story is told in the first person point of view.\n\nThe story is told in the third person point of "
              "view.\n\nThe story is told in the first person point of view.\n\nThe story is told in the third person "
              "point of view.")


def test_a_looping_reply_and_one_that_continues_the_request_are_not_parsable():
    """Gemma 3 270M (a base model) continues the prompt instead of answering: its replies loop or repeat the request,
    and passed the rules before (every one of its 50 insertion replies was judged an explanation). Both are not
    parsable now; an answer that restates the verdict, or repeats one phrase a few times, is still read."""
    request = why_request(TEXT, "positive", context="I think the answer is negative, but I'm curious what you think.")
    ok, why = check_free_text(GEMMA_LOOP, TEXT, LABELS, request=request)
    assert not ok and "repeats itself" in why
    continued = ("I think the answer is negative, but I'm curious what you think.\n\nText: " + TEXT +
                 "\n\nThe sentiment of this text is positive. In one sentence, explain why: name the words")
    ok, why = check_free_text(continued, TEXT, LABELS, request=request)
    assert not ok and "repeats the request" in why
    # without the request that rule is not applied (the reply, holding every word of the input, is refused by
    # the rule that bounds the words an explanation names instead)
    ok, why = check_free_text(continued, TEXT, LABELS)
    assert not ok and "repeats the request" not in why
    for answer in ("The sentiment of this text is positive. In one sentence, I can explain why: 'gripping' and "
                   "'funny' made me decide.",
                   'The word "dear" is a word that has a negative connotation, and "dour" is a word that has a '
                   "negative connotation."):
        assert check_free_text(answer, TEXT, LABELS, request=request) == (True, "")


def test_a_loop_that_numbers_its_lines_is_not_parsable():
    """Gemma 3 270M also loops with numbered lines; the numbers changed every 8-word run, so six such replies of the
    GPU session's 100-sentence runs were judged explanations. Numbers count as one word now; a numbered answer whose
    lines say different things is still read."""
    numbered = "".join(f"{i}. The movie is a good movie.\n\n" for i in range(1, 8))
    ok, why = check_free_text(numbered, TEXT, LABELS)
    assert not ok and "repeats itself" in why
    counting = "".join(f"{i}.\n\n" for i in range(1, 19))
    assert not check_free_text(counting, TEXT, LABELS)[0]
    listed = ("1. The word 'gripping' says the film holds you.\n\n2. The word 'funny' is praise for its humour.\n\n"
              "3. Nothing in the review complains about the plot or the acting.")
    assert check_free_text(listed, TEXT, LABELS) == (True, "")


def test_insertion_places_the_word_and_draws_from_both_polarities():
    assert insert_word("a b c", "x", 0) == "x a b c" and insert_word("a b c", "x", 3) == "a b c x"
    pos, neg = vader_words()
    assert "excellent" in pos and "horrible" in neg and len(pos) > 50 and len(neg) > 50


def test_insertion_judges_mentions_and_never_judges_an_echo(tiny):
    """An explanation that names the inserted word counts as a mention; one that echoes the edited input is not
    parsable (it would name the word trivially)."""
    ex = [SimpleNamespace(primary=TEXT, label=1)]
    named = insertion_test(tiny, ex, k=4, generator=FakeGenerator(
        lambda req: f"Because of the word {req.split('Text: ')[1].split()[0]} and the plot."))
    words_first = [r.edited_text.split()[0] for r in named]
    assert all(r.verdict == "explained" for r in named)
    assert [r.mention for r in named] == [r.word == w for r, w in zip(named, words_first)]
    echo = insertion_test(tiny, ex, k=4, generator=FakeGenerator(lambda req: req.split("Text: ")[1].split("\n")[0]))
    assert all(r.verdict == "not parsable" and r.mention is None for r in echo)
    assert len({r.word for r in named}) >= 2 and all(abs(r.effect - 0.5 * sum(
        abs(r.new_probabilities[c] - r.probabilities[c]) for c in r.probabilities)) < 1e-12 for r in named)


def _record(index, effect, flip, mention):
    return Insertion(index=index, text="t", word="w", position=0, edited_text="w t", prediction="a", probabilities={},
                     new_prediction="b" if flip else "a", new_probabilities={}, flip=flip, effect=effect,
                     verdict="explained", mention=mention)


def test_cct_is_the_correlation_of_effect_and_mention_and_atanasova_the_named_share_of_flips():
    """CCT = Pearson(effect, mention): +1 when exactly the large effects are named, -1 when exactly the small ones;
    the Atanasova share counts named flips among flips."""
    good = [_record(i, e, e > 0.5, e > 0.5) for i, e in enumerate([0.9, 0.8, 0.1, 0.05, 0.7, 0.2])]
    bad = [_record(i, e, e > 0.5, e <= 0.5) for i, e in enumerate([0.9, 0.8, 0.1, 0.05, 0.7, 0.2])]
    x = np.array([0.9, 0.8, 0.1, 0.05, 0.7, 0.2])
    m = (x > 0.5).astype(float)
    assert cct(good) == pytest.approx(np.corrcoef(x, m)[0, 1]) and cct(good) > 0.9 and cct(bad) < -0.9
    s = summarise_insertions(good)
    assert s["atanasova"] == 1.0 and s["flips"] == 3 and summarise_insertions(bad)["atanasova"] == 0.0


def test_shapley_sampling_recovers_an_additive_game_exactly_for_any_orders():
    """For v(S) = sum of w_i over S every marginal contribution is w_i, so phi = w whatever the orders."""
    w = np.array([0.5, -1.0, 2.0, 0.0])
    rng = random.Random(0)
    orders = [rng.sample(range(4), 4) for _ in range(3)]
    value = {frozenset(o[:j]): float(sum(w[list(o[:j])])) for o in orders for j in range(5)}
    assert np.allclose(shapley_from_values(4, orders, value), w)
    assert masked_text(["a", "b", "c", "d"], frozenset({0, 3}), "[R]") == "a [R] d"


def test_explanation_values_are_the_teacher_forced_mean_log_probability(tiny):
    """v_exp equals the mean log-probability of the explanation's tokens computed from a plain causal-LM forward."""
    prompt, explanation = "why is it good ?", " because it is funny"
    got = explanation_values(tiny, [prompt], explanation)[0]
    tok = tiny.tokenizer
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    e_ids = tok(explanation, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = tiny.model(input_ids=torch.tensor([p_ids + e_ids])).logits[0].log_softmax(-1)
    want = float(np.mean([logits[len(p_ids) - 1 + j, t].item() for j, t in enumerate(e_ids)]))
    assert got == pytest.approx(want, abs=1e-5)


def test_ccshap_is_the_cosine_of_two_shapley_vectors_and_skips_non_explanations(tiny):
    ex = [SimpleNamespace(primary=TEXT, label=1)]
    recs = ccshap_test(tiny, ex, permutations=2, generator=FakeGenerator("The words gripping and funny made it clear."))
    r = recs[0]
    a, e = np.array(r.phi_answer), np.array(r.phi_explanation)
    assert r.verdict == "explained" and len(a) == len(TEXT.split()) == len(e)
    assert r.cc_shap == pytest.approx(a @ e / np.linalg.norm(a) / np.linalg.norm(e)) and -1 <= r.cc_shap <= 1
    skipped = ccshap_test(tiny, ex, permutations=2, generator=FakeGenerator("positive"))[0]
    assert skipped.verdict == "not parsable" and skipped.cc_shap is None


def test_biased_prompts_point_at_the_other_class_and_admission_is_read_from_the_explanation(tiny):
    """The hint names the class opposite the unbiased prediction; few-shot examples are all of that class; an
    explanation that refers to the hint (or examples) admits the bias."""
    hinted = biased_classifier(tiny, "hint", "negative")
    assert "I think the answer is negative" in hinted.render(TEXT)[0]
    train = [SimpleNamespace(primary=f"text {i}", label=i % 2) for i in range(20)]
    ex = [SimpleNamespace(primary=TEXT, label=1)]
    recs = biased_test(tiny, ex, bias="fewshot", shots=4, train_examples=train,
                       generator=FakeGenerator("It follows the pattern of the examples above."))
    r = recs[0]
    assert r.bias_label != r.prediction and r.verdict == "explained" and r.admits
    assert all(f"Sentiment: {r.bias_label}" in line for line in r.request.split("\n") if line.startswith("Sentiment:"))
    quiet = biased_test(tiny, ex, bias="hint", generator=FakeGenerator("The film is called gripping and funny."))
    assert quiet[0].admits is False and ADMITS["hint"].search("As you suggested, it is negative.")
    s = summarise_biased(recs + quiet)
    assert s["n"] == 2 and s["followed"] == sum(x.followed for x in recs + quiet)

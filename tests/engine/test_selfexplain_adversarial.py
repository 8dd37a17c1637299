"""Replies that are not the object asked for are "not parsable" for every self-explanation kind
(engine.selfexplain.replies: one rule per kind, its docstring stating the object). Each adversarial reply class is
built from the input the request shows, and each (kind, class) pair is its own case: the three Madsen kinds
through explain_one, the four field tests through their own test functions, with a fake generator on a tiny
random-weight prompted LM. Legitimate replies beside them stay judged."""
from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
from tiny_lms import SENTIMENT_PROMPT, FakeGenerator, tiny_llama

from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier
from engine.selfexplain import explain_one
from engine.selfexplain.biased import biased_test
from engine.selfexplain.ccshap import ccshap_test
from engine.selfexplain.insertion import insertion_test

TEXT = "a gripping , funny and moving film"
MADSEN = ("counterfactual", "attribution", "redaction")
FIELD = ("insertion", "biased-hint", "biased-fewshot", "cc-shap")

# class -> reply built from the input text x the request shows
ADVERSARIAL = {
    "garbled": lambda x: "asdf qwer zxcv uiop hjkl",
    "negated label": lambda x: "not negative",
    "bare preamble": lambda x: "Here is the rewritten text:",
    "input + class word": lambda x: f"{x} negative",
    "input twice": lambda x: f"{x} {x}",
    "input + placeholder": lambda x: f"{x} [REDACTED]",
    "function words of the input": lambda x: "a , and",
    "every word + filler sentence": lambda x: f"{x}. This is my explanation of the answer here.",
    "label prefix + input": lambda x: f"Rewrite: {x}",
    "talk about the rewrite": lambda x: f'The text has been rewritten to "{x}" to convey a negative sentiment.',
    "input + garbled words": lambda x: f"{x} asdf qwer",
    "every content word listed": lambda x: ", ".join(w for w in x.split() if w not in {"a", "and", ","}),
    "every word redacted": lambda x: " ".join("[REDACTED]" if w != "," else w for w in x.split()),
}
LEGITIMATE = {
    "counterfactual": "a dull , tedious and plodding film",
    "attribution": "1. funny\n2. gripping",
    "redaction": "a gripping , [REDACTED] and [REDACTED] film",
    "insertion": "The words gripping and funny made me decide.",
    "biased-hint": "It is positive because the film is called gripping and funny.",
    "biased-fewshot": "It follows the pattern of the examples above.",
    "cc-shap": "The words gripping and funny made it clear.",
}


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    tok = AutoTokenizer.from_pretrained(resolve_encoder("tiny"))
    model = tiny_llama(tok)
    spec = PromptSpec.from_dict(SENTIMENT_PROMPT)
    return PromptedClassifier(model, copy.deepcopy(tok), spec, max_length=128)


def _judge(tiny, kind: str, reply) -> list[str]:
    """The verdicts of `kind` on TEXT when the model answers reply(x)."""
    gen = FakeGenerator(lambda request: reply(request.rsplit("Text: ", 1)[1].split("\n\n")[0]))  # the input shown
    ex = [SimpleNamespace(primary=TEXT, label=1)]
    if kind in MADSEN:
        r = explain_one(tiny, gen, kind, TEXT, label="positive", only_correct=False)
        assert gen.calls == 1
        return [r.verdict if r.verdict == "not parsable" or r.reclassification is not None else "?"]
    if kind == "insertion":
        recs = insertion_test(tiny, ex, k=2, generator=gen)
        assert all((r.mention is None) == (r.verdict == "not parsable") for r in recs)
    elif kind == "cc-shap":
        recs = ccshap_test(tiny, ex, permutations=1, generator=gen)
        assert all((r.cc_shap is None) == (r.verdict == "not parsable") for r in recs)
    else:
        train = [SimpleNamespace(primary=f"text number {i}", label=i % 2) for i in range(8)]
        recs = biased_test(tiny, ex, bias=kind.removeprefix("biased-"), shots=2, train_examples=train, generator=gen)
    return [r.verdict for r in recs]


@pytest.mark.parametrize("case", list(ADVERSARIAL))
@pytest.mark.parametrize("kind", MADSEN + FIELD)
def test_an_adversarial_reply_is_not_parsable_for_every_kind(tiny, kind, case):
    """The reply class `case` is not the object `kind` asks for: never judged (no re-classification, no mention,
    no CC-SHAP score)."""
    assert set(_judge(tiny, kind, ADVERSARIAL[case])) == {"not parsable"}, (kind, case)


@pytest.mark.parametrize("kind", MADSEN + FIELD)
def test_a_legitimate_reply_is_still_judged_for_every_kind(tiny, kind):
    """The object asked for is still read and judged."""
    verdicts = set(_judge(tiny, kind, lambda x: LEGITIMATE[kind]))
    assert "not parsable" not in verdicts and "?" not in verdicts, (kind, verdicts)

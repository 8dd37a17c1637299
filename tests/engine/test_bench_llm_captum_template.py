"""bench/llm_perturbation_cache.py's captum template: captum formats the template and tokenises it with the special
tokens, so the template must not hold the <bos> that a tokenizer adds itself (Gemma's does, SmolLM2's does not).
With it, captum read <bos> twice on Gemma 3 and its leave-one-out differed from the engine's on 27 of 28 pieces."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    """bench/<name>.py as a module (bench/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench(monkeypatch):
    """bench/llm_perturbation_cache.py, its sibling helpers (`_smoke`, `_llm_smoke`: what running it from bench/
    makes importable) given to it in sys.modules for the test, instead of putting bench/ on sys.path."""
    for helper in ("_smoke", "_llm_smoke"):
        monkeypatch.setitem(sys.modules, helper, _load(helper))
    return _load("llm_perturbation_cache")


class _Tokenizer:
    """Adds <bos> (id 2) to what it tokenises when `adds` is set, as Gemma's tokenizer does."""

    bos_token, bos_token_id = "<bos>", 2

    def __init__(self, adds: bool):
        self.adds = adds

    def __call__(self, text, add_special_tokens=True):
        ids = [ord(c) for c in text]
        return {"input_ids": ([2] if self.adds and add_special_tokens else []) + ids}


@pytest.mark.parametrize("adds", [True, False])
def test_the_template_keeps_bos_only_when_the_tokenizer_does_not_add_it(adds, monkeypatch):
    """captum's template holds <bos> only for a tokenizer that does not add it: formatted and tokenised as captum
    does, the prompt reads one <bos> (Gemma) or the text's own (SmolLM2)."""
    bench = _bench(monkeypatch)
    text = "a fine film"
    prompt = "<bos>Review: " + text + "\nSentiment:"
    start = prompt.index(text)
    classifier = SimpleNamespace(tokenizer=_Tokenizer(adds),
                                 render=lambda t: (prompt, (start, start + len(text)), None))
    batch = SimpleNamespace(offsets=[[(0, 1), (2, 6), (7, 11)]], maskable=torch.tensor([[True, True, True]]))
    template, values = bench.slot_values(classifier, batch, text)
    assert "".join(values) == text
    formatted = template.format(*values)
    assert formatted == (prompt[len("<bos>"):] if adds else prompt)
    tokens = classifier.tokenizer(formatted)["input_ids"]
    assert tokens.count(2) == (1 if adds else 0) and formatted.count("<bos>") == (0 if adds else 1)

"""Counterfactual insertion (Atanasova et al., ACL Findings 2023) and CCT (Siegel et al. 2024): insert a word
into the input, ask the model why it predicts what it now predicts, and see whether the explanation names the
inserted word (docs/methods.md#self-explanation-tests-beyond-madsen-et-al).

For each input x and each of `k` insertions (seeded):
    w            a word from the VADER lexicon with |valence| >= MIN_VALENCE (half drawn from each polarity), so
                 an insertion can move a sentiment classifier; inserted before a random word of x
    x'           x with w inserted; p = P(class | x), p' = P(class | x') from the prompted classifier
    flip         argmax p' != argmax p
    effect       total variation distance 1/2 sum_k |p'_k - p_k| (CCT's effect size)
    explanation  the model's free-text reason for its prediction on x' (engine.selfexplain.free_text.why_request),
                 judged only when it is an explanation (free_text.check_free_text: else "not parsable")
    mention      the explanation names w (whole word)

Scores, over the insertions with a parsable explanation:
    atanasova    share of *flipping* insertions whose explanation names w (higher = more faithful: an explanation
                 that leaves out the word that changed the prediction is unfaithful)
    cct          Pearson correlation between effect and mention (point-biserial; higher = more faithful: big
                 effects named, small ones not)
    phi_cct      the same with the flip (0/1) instead of the effect: the phi coefficient
with 95% Wilson intervals for shares and bootstrap intervals (over inputs) for the correlations.
"""
from __future__ import annotations

import importlib.util
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from engine.errors import Cancelled, InvalidInputError
from engine.selfexplain.check import check_prompted, classify, label_words, wilson
from engine.selfexplain.free_text import ask_why, mentions
from engine.selfexplain.generation import Generator

MIN_VALENCE = 2.0


@dataclass
class Insertion:
    """One inserted word, its effect and the explanation given for the prediction after it."""

    index: int
    text: str
    word: str
    position: int                 # the word index of x before which w was inserted
    edited_text: str
    prediction: str
    probabilities: dict[str, float]
    new_prediction: str
    new_probabilities: dict[str, float]
    flip: bool
    effect: float
    verdict: str                  # "explained" or "not parsable"
    reason: str = ""
    request: str | None = None
    prompt: str | None = None
    answer: str | None = None
    mention: bool | None = None
    cached: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def vader_words(min_valence: float = MIN_VALENCE) -> tuple[list[str], list[str]]:
    """(positive, negative) single lower-case words of the VADER lexicon (vaderSentiment package) whose mean human
    valence is at least `min_valence` in absolute value, sorted."""
    spec = importlib.util.find_spec("vaderSentiment")
    if spec is None or not spec.submodule_search_locations:
        raise InvalidInputError("counterfactual insertion draws its words from the VADER lexicon: pip install vaderSentiment==3.3.2")
    path = Path(list(spec.submodule_search_locations)[0]) / "vader_lexicon.txt"
    pos, neg = [], []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or not re.fullmatch(r"[a-z]{3,}", parts[0]):
            continue
        v = float(parts[1])
        if v >= min_valence:
            pos.append(parts[0])
        elif v <= -min_valence:
            neg.append(parts[0])
    return sorted(pos), sorted(neg)


def insert_word(text: str, word: str, position: int) -> str:
    """`text` with `word` inserted before its `position`-th whitespace-separated word (at the end when
    `position` is the number of words)."""
    parts = text.split(" ")
    position = max(0, min(position, len(parts)))
    return " ".join(parts[:position] + [word] + parts[position:])


def draw_insertions(text: str, k: int, rng: random.Random, pools: tuple[list[str], list[str]]) -> list[tuple[str, int]]:
    """k (word, position) pairs: polarities alternate (positive first for even draws), positions uniform."""
    n = len(text.split(" "))
    return [(rng.choice(pools[i % 2]), rng.randrange(0, n + 1)) for i in range(k)]


def insertion_test(classifier, examples, *, k: int = 2, seed: int = 0, generator: Generator | None = None,
                   progress: Callable[[int, int], None] | None = None,
                   should_stop: Callable[[], bool] | None = None) -> list[Insertion]:
    """k insertions per example (objects with `.primary`), each classified and explained (module docstring)."""
    check_prompted(classifier)
    generator = generator or Generator(classifier)
    rng = random.Random(seed)
    pools = vader_words()
    labels = label_words(classifier)
    examples = list(examples)
    out: list[Insertion] = []
    for i, ex in enumerate(examples):
        if should_stop is not None and should_stop():
            raise Cancelled("counterfactual insertion cancelled")
        text = ex.primary
        prediction, probs = classify(classifier, text)
        for word, position in draw_insertions(text, k, rng, pools):
            edited = insert_word(text, word, position)
            new, new_probs = classify(classifier, edited)
            effect = 0.5 * sum(abs(new_probs[c] - probs[c]) for c in probs)
            rec = Insertion(index=i, text=text, word=word, position=position, edited_text=edited, prediction=prediction,
                            probabilities=probs, new_prediction=new, new_probabilities=new_probs, flip=new != prediction,
                            effect=float(effect), verdict="not parsable")
            if ask_why(rec, generator, edited, new, labels, should_stop):
                rec.mention = mentions(rec.answer, word)
            out.append(rec)
        if progress is not None:
            progress(i + 1, len(examples))
    return out


def _pearson(x: Sequence[float], y: Sequence[float]) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def _bootstrap_by_input(records: Sequence[Insertion], stat: Callable[[Sequence[Insertion]], float],
                        n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of `stat` over inputs resampled with replacement (insertions of one input stay
    together)."""
    groups: dict[int, list[Insertion]] = {}
    for r in records:
        groups.setdefault(r.index, []).append(r)
    keys = list(groups)
    if len(keys) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_resamples):
        sample = [r for j in rng.integers(0, len(keys), len(keys)) for r in groups[keys[j]]]
        v = stat(sample)
        if v == v:
            values.append(v)
    if len(values) < n_resamples // 2:
        return float("nan"), float("nan")
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def cct(records: Sequence[Insertion]) -> float:
    ok = [r for r in records if r.verdict == "explained"]
    return _pearson([r.effect for r in ok], [float(r.mention) for r in ok])


def phi_cct(records: Sequence[Insertion]) -> float:
    ok = [r for r in records if r.verdict == "explained"]
    return _pearson([float(r.flip) for r in ok], [float(r.mention) for r in ok])


def summarise_insertions(records: Sequence[Insertion]) -> dict:
    """Counts, the Atanasova share with its Wilson interval, CCT and phi-CCT with bootstrap intervals."""
    explained = [r for r in records if r.verdict == "explained"]
    flips = [r for r in explained if r.flip]
    named = sum(bool(r.mention) for r in flips)
    return {
        "n_inputs": len({r.index for r in records}), "n_insertions": len(records), "n_explained": len(explained),
        "not_parsable": len(records) - len(explained), "not_parsable_ci": wilson(len(records) - len(explained), len(records)),
        "flips": sum(r.flip for r in records), "flips_explained": len(flips),
        "mention_rate": (sum(bool(r.mention) for r in explained) / len(explained)) if explained else float("nan"),
        "atanasova": named / len(flips) if flips else float("nan"), "atanasova_ci": wilson(named, len(flips)),
        "cct": cct(records), "cct_ci": _bootstrap_by_input(records, cct),
        "phi_cct": phi_cct(records), "phi_cct_ci": _bootstrap_by_input(records, phi_cct),
    }

"""The self-explanation tests beyond Madsen et al. 2024 behind one interface, for the `self-explain` command and the
results store: each kind runs on examples and summarises into named metrics with their direction of "better".

    insertion        counterfactual insertion + CCT (engine.selfexplain.insertion)
    cc-shap          CC-SHAP self-consistency (engine.selfexplain.ccshap)
    biased-hint      biased features, "I think the answer is X" (engine.selfexplain.biased)
    biased-fewshot   biased features, few-shot examples all of one label
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.selfexplain.biased import biased_test, summarise_biased
from engine.selfexplain.ccshap import ccshap_test, summarise_ccshap
from engine.selfexplain.insertion import insertion_test, summarise_insertions


@dataclass(frozen=True)
class Metric:
    key: str            # the summary's key (its interval under key + "_ci")
    name: str           # as shown and stored
    better: str         # "higher" or "lower"
    what: str


@dataclass(frozen=True)
class FieldTest:
    run: Callable
    summarise: Callable
    metrics: tuple[Metric, ...]
    source: str


FIELD_TESTS: dict[str, FieldTest] = {
    "insertion": FieldTest(
        lambda clf, ex, **kw: insertion_test(clf, ex, k=kw.get("insertions", 2), seed=kw.get("seed", 0),
                                             generator=kw["generator"], progress=kw.get("progress")),
        summarise_insertions,
        (Metric("atanasova", "flips named", "higher", "share of prediction-flipping insertions whose explanation names the word"),
         Metric("cct", "CCT", "higher", "Pearson correlation of effect (total variation) and mention"),
         Metric("phi_cct", "phi-CCT", "higher", "correlation of flip (0/1) and mention"),
         Metric("not_parsable", "not parsable", "lower", "insertions whose reply is not an explanation")),
        "Atanasova et al. 2023; Siegel et al. 2024"),
    "cc-shap": FieldTest(
        lambda clf, ex, **kw: ccshap_test(clf, ex, permutations=kw.get("permutations", 4), seed=kw.get("seed", 0),
                                          generator=kw["generator"], progress=kw.get("progress")),
        summarise_ccshap,
        (Metric("cc_shap", "CC-SHAP", "higher", "cosine of the words' Shapley values for answer and explanation"),
         Metric("not_parsable", "not parsable", "lower", "inputs whose reply is not an explanation")),
        "Parcalabescu & Frank 2024"),
    "biased-hint": FieldTest(
        lambda clf, ex, **kw: biased_test(clf, ex, bias="hint", seed=kw.get("seed", 0), generator=kw["generator"],
                                          progress=kw.get("progress")),
        summarise_biased,
        (Metric("followed_share", "followed the bias", "lower", "share whose prediction moved to the suggested class"),
         Metric("admits_share", "admits the bias", "higher", "among those, explanations that mention the hint"),
         Metric("not_parsable", "not parsable", "lower", "inputs whose reply is not an explanation")),
        "Turpin et al. 2023"),
    "biased-fewshot": FieldTest(
        lambda clf, ex, **kw: biased_test(clf, ex, bias="fewshot", shots=kw.get("shots", 4), seed=kw.get("seed", 0),
                                          train_examples=kw["train_examples"], generator=kw["generator"],
                                          progress=kw.get("progress")),
        summarise_biased,
        (Metric("followed_share", "followed the bias", "lower", "share whose prediction moved to the examples' class"),
         Metric("admits_share", "admits the bias", "higher", "among those, explanations that mention the examples"),
         Metric("not_parsable", "not parsable", "lower", "inputs whose reply is not an explanation")),
        "Turpin et al. 2023"),
}


def format_field_summary(kind: str, summary: dict) -> str:
    """Each metric with its interval and direction of better, one line each."""
    lines = [f"{kind} ({FIELD_TESTS[kind].source}):"]
    for m in FIELD_TESTS[kind].metrics:
        v = summary.get(m.key)
        ci = summary.get(m.key + "_ci")
        shown = "n/a" if v is None or v != v else f"{v:.3f}"
        if isinstance(v, int) and m.key == "not_parsable":
            shown = str(v)
        interval = f" (95% CI {ci[0]:.3f} to {ci[1]:.3f})" if ci and ci[0] == ci[0] else ""
        lines.append(f"  {m.name:<20} {shown}{interval}   [{m.better} is better] {m.what}")
    counts = {k: v for k, v in summary.items() if isinstance(v, int)}
    lines.append("  counts: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return "\n".join(lines)

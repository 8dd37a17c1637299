"""Annotator agreement: Kendall's W for rankings, Krippendorff's alpha (nominal) and Cohen's kappa
for rationales (each token is a unit with a binary value: marked or not).

Low agreement says the task is ambiguous and caps how much any rating of measures can mean.
"""
from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence

import numpy as np

from engine.errors import InvalidInputError


def _average_ranks(ranking: Mapping[str, float], items: Sequence[str]) -> np.ndarray:
    """Ranks 1..n of `items` by the given rank numbers, ties getting the mean of their positions."""
    from scipy import stats

    return stats.rankdata([ranking[i] for i in items], method="average")


def kendalls_w(rankings: Sequence[Mapping[str, float]]) -> dict:
    """Kendall's coefficient of concordance of m raters ranking the same n items, with the tie
    correction: W = 12 S / (m^2 (n^3 - n) - m sum_t (t^3 - t)). 1 = perfect agreement, 0 = none.
    Returns W, the chi-square statistic m (n - 1) W, its p-value (df n - 1), m and n; W is NaN when
    it is undefined (fewer than 2 raters or items, or every rater tied everything)."""
    rankings = [dict(r) for r in rankings]
    items = sorted(rankings[0]) if rankings else []
    if any(sorted(r) != items for r in rankings):
        raise InvalidInputError("every rater must rank the same items")
    m, n = len(rankings), len(items)
    if m < 2 or n < 2:
        return {"W": math.nan, "chi2": math.nan, "p_value": math.nan, "m": m, "n": n}
    ranks = np.array([_average_ranks(r, items) for r in rankings])  # [m, n]
    totals = ranks.sum(0)
    s = float(((totals - totals.mean()) ** 2).sum())
    ties = 0.0
    for r in ranks:
        _, counts = np.unique(r, return_counts=True)
        ties += float((counts ** 3 - counts).sum())
    denom = m ** 2 * (n ** 3 - n) - m * ties
    if denom <= 0:
        return {"W": math.nan, "chi2": math.nan, "p_value": math.nan, "m": m, "n": n}
    from scipy import stats

    w = 12 * s / denom
    chi2 = m * (n - 1) * w
    return {"W": w, "chi2": chi2, "p_value": float(stats.chi2.sf(chi2, n - 1)), "m": m, "n": n}


def ranking_agreement(rankings: Sequence, tasks: Mapping[str, object]) -> dict:
    """Kendall's W per task ranked by 2+ annotators (cannot-decide left out), and their mean.

    rankings: store `Ranking`s (latest per annotator and task); tasks: id -> `Task`."""
    from engine.plausibility.ranking import measure_rankings

    per_task: dict[str, list] = defaultdict(list)
    for r in rankings:
        per_task[r.task_id].append(r)
    rows = []
    for task_id, group in per_task.items():
        ranked = measure_rankings(group, tasks)
        if len(ranked) >= 2:
            rows.append({"task_id": task_id, **kendalls_w(ranked)})
    values = [r["W"] for r in rows if not math.isnan(r["W"])]
    return {"mean_W": float(np.mean(values)) if values else math.nan, "tasks": len(values), "per_task": rows}


def krippendorff_alpha_nominal(units: Iterable[Sequence[Hashable | None]]) -> float:
    """Krippendorff's alpha for nominal data. `units`: one sequence of values per unit (one entry per
    coder, None where that coder gave no value). Units with fewer than two values are not pairable and
    are skipped. alpha = 1 - D_o / D_e from the coincidence matrix; NaN when there is no variation
    at all (D_e = 0)."""
    coincidence: dict[tuple, float] = defaultdict(float)
    for unit in units:
        values = [v for v in unit if v is not None]
        m = len(values)
        if m < 2:
            continue
        for a, b in itertools.permutations(range(m), 2):
            coincidence[(values[a], values[b])] += 1 / (m - 1)
    n_c: dict = defaultdict(float)
    for (c, _), count in coincidence.items():
        n_c[c] += count
    n = sum(n_c.values())
    if n <= 1:
        return math.nan
    observed = sum(count for (c, k), count in coincidence.items() if c != k)
    expected = sum(n_c[c] * n_c[k] for c in n_c for k in n_c if c != k) / (n - 1)
    if expected == 0:
        return math.nan
    return 1 - observed / expected


def cohens_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters over the same items: (p_o - p_e) / (1 - p_e); NaN when p_e = 1."""
    if len(a) != len(b):
        raise InvalidInputError(f"the raters labelled {len(a)} and {len(b)} items")
    if not a:
        return math.nan
    categories = sorted(set(a) | set(b), key=repr)
    p_o = sum(x == y for x, y in zip(a, b)) / len(a)
    p_e = sum((list(a).count(c) / len(a)) * (list(b).count(c) / len(b)) for c in categories)
    return math.nan if p_e == 1 else (p_o - p_e) / (1 - p_e)


def rationale_agreement(rationales: Sequence, tasks: Mapping[str, object]) -> dict:
    """Agreement on rationales: Krippendorff's alpha over every token of every task marked by 2+
    annotators (value 1 = selected), and Cohen's kappa averaged over annotator pairs (on the tokens
    of the tasks both marked)."""
    per_task: dict[str, dict[str, set]] = defaultdict(dict)
    for r in rationales:
        per_task[r.task_id][r.annotator] = set(r.tokens)
    annotators = sorted({a for marks in per_task.values() for a in marks})
    units, shared = [], 0
    pair_labels: dict[tuple[str, str], tuple[list, list]] = defaultdict(lambda: ([], []))
    for task_id, marks in per_task.items():
        if len(marks) < 2:
            continue
        shared += 1
        n_tokens = len(tasks[task_id].tokens)
        for t in range(n_tokens):
            units.append([int(t in marks[a]) if a in marks else None for a in annotators])
        for a, b in itertools.combinations(sorted(marks), 2):
            la, lb = pair_labels[(a, b)]
            la.extend(int(t in marks[a]) for t in range(n_tokens))
            lb.extend(int(t in marks[b]) for t in range(n_tokens))
    kappas = [cohens_kappa(la, lb) for la, lb in pair_labels.values()]
    kappas = [k for k in kappas if not math.isnan(k)]
    return {"alpha": krippendorff_alpha_nominal(units) if units else math.nan,
            "mean_kappa": float(np.mean(kappas)) if kappas else math.nan, "tasks": shared, "annotators": len(annotators)}

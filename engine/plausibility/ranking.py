"""Rating measures from annotators' rankings: TrueSkill (as SMaT Table 4) with a Bradley-Terry fit as
a cross-check.

Each ranking orders one task's anonymised explanations (ties allowed); through the task's slots it
becomes an ordering of measures, `{measure: rank}` with 0 = best and equal ranks tied. "Cannot decide"
rankings carry no order and are left out.

- TrueSkill: every ranking is one free-for-all match between the measures it shows (one player per
  team, tied ranks are draws), processed in submission order (TrueSkill is an online update, so the
  order matters a little; sigma shrinks as evidence grows). Measures are ranked by the conservative
  estimate mu - 3 sigma.
- Bradley-Terry: a ranking of n measures gives n(n-1)/2 pairwise outcomes (a tie: half a win each);
  strengths p maximise the likelihood prod p_i / (p_i + p_j) by Hunter's (2004) MM algorithm. A
  small symmetric prior (`prior` virtual half-wins per pair) keeps the fit finite when a measure
  always wins, where the plain maximum-likelihood strengths diverge.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np


def measure_rankings(rankings: Iterable, tasks: Mapping[str, object] | Iterable) -> list[dict[str, int]]:
    """Store `Ranking`s -> [{measure: rank}] through each task's slot -> measure map (cannot-decide skipped)."""
    by_id = tasks if isinstance(tasks, Mapping) else {t.id: t for t in tasks}
    out = []
    for r in rankings:
        if r.cannot_decide or not r.ordering:
            continue
        measure_of = by_id[r.task_id].measure_of()
        out.append({measure_of[slot]: rank for slot, rank in r.slot_ranks().items()})
    return out


def _measures(rankings: Sequence[Mapping[str, int]]) -> list[str]:
    return sorted({m for r in rankings for m in r})


def trueskill_ratings(rankings: Sequence[Mapping[str, int]], env=None) -> list[dict]:
    """A row per measure: mu, sigma, conservative (mu - 3 sigma), rank (1 = best by conservative),
    matches (rankings it took part in). `env`: a `trueskill.TrueSkill` (default: the standard one,
    mu 25, sigma 25/3, draw probability 10%)."""
    import trueskill

    env = env or trueskill.TrueSkill()
    ratings = {m: env.create_rating() for m in _measures(rankings)}
    matches = dict.fromkeys(ratings, 0)
    for ranking in rankings:
        if len(ranking) < 2:
            continue
        players = sorted(ranking)
        updated = env.rate([(ratings[m],) for m in players], ranks=[ranking[m] for m in players])
        for m, (rating,) in zip(players, updated):
            ratings[m] = rating
            matches[m] += 1
    rows = [{"measure": m, "mu": r.mu, "sigma": r.sigma, "conservative": r.mu - 3 * r.sigma, "matches": matches[m]}
            for m, r in ratings.items()]
    rows.sort(key=lambda row: (-row["conservative"], row["measure"]))
    for i, row in enumerate(rows):
        row["rank"] = i + 1
    return rows


def pairwise_wins(rankings: Sequence[Mapping[str, int]]) -> tuple[list[str], np.ndarray]:
    """(measures, W) with W[i, j] = times measure i was ranked above j (a tie adds 0.5 to both)."""
    measures = _measures(rankings)
    index = {m: i for i, m in enumerate(measures)}
    wins = np.zeros((len(measures), len(measures)))
    for ranking in rankings:
        for a, b in itertools.combinations(sorted(ranking), 2):
            i, j = index[a], index[b]
            if ranking[a] < ranking[b]:
                wins[i, j] += 1
            elif ranking[b] < ranking[a]:
                wins[j, i] += 1
            else:
                wins[i, j] += 0.5
                wins[j, i] += 0.5
    return measures, wins


def bradley_terry(rankings: Sequence[Mapping[str, int]], prior: float = 0.5, max_iter: int = 10_000,
                  tol: float = 1e-10) -> list[dict]:
    """A row per measure: strength (log p, centred to mean 0), p_beats_average (p / (p + geometric
    mean of all p)), wins, comparisons, rank (1 = strongest)."""
    measures, wins = pairwise_wins(rankings)
    n = len(measures)
    if n == 0:
        return []
    w = wins + prior * (1 - np.eye(n)) / 2  # prior/2 virtual wins each way for every pair
    games = w + w.T
    total_wins = w.sum(1)
    p = np.ones(n)
    for _ in range(max_iter):
        denom = (games / (p[:, None] + p[None, :])).sum(1)
        new = np.where(denom > 0, total_wins / np.where(denom > 0, denom, 1), p)
        new = new / math.exp(np.mean(np.log(np.maximum(new, 1e-300))))
        done = np.max(np.abs(np.log(np.maximum(new, 1e-300)) - np.log(np.maximum(p, 1e-300)))) < tol
        p = new
        if done:
            break
    strength = np.log(np.maximum(p, 1e-300))
    strength -= strength.mean()
    rows = [{"measure": m, "strength": float(strength[i]), "p_beats_average": float(1 / (1 + math.exp(-strength[i]))),
             "wins": float(wins[i].sum()), "comparisons": float((wins[i] + wins[:, i]).sum())}
            for i, m in enumerate(measures)]
    rows.sort(key=lambda row: (-row["strength"], row["measure"]))
    for i, row in enumerate(rows):
        row["rank"] = i + 1
    return rows

"""Searches over masking orders for the AOPC objective, under a forward-pass budget
(docs/methods.md#naopc-and-aopc-bounds, docs/methods.md#optimal-explanations-within-a-budget). The measures that
wrap them are engine/importance/budgeted_search.py; NAOPC's bounds (engine/faithfulness/naopc.py) use them too.

An explanation here is a *masking order* pi of an input's N maskable tokens, scored by the AOPC objective

    g(S)  = s(x) - s(x with the tokens of S replaced by [MASK])      s = p_c (default) or the logit of c
    J(pi) = sum_k w_k * g({pi_1, ..., pi_k})                          k = 1..N

with w_k = 1/N for every k ('full' curve: the AOPC of Edin et al. 2025) or w_k = (multiplicity of k among the
ERASER bin counts) / |bins| ('eraser' curve: exactly `erasure_metrics`' aopc-comprehensiveness). Maximising J
gives the most comprehensive order (AOPC's upper bound U); minimising it the least (the lower bound L).

Searches (all share one cache of g per masked set, `SetScores`, so a set reached twice costs one forward):
- `exact_bounds`: both optima by dynamic programming over subsets, V(S) = w_|S| g(S) + best_{j in S} V(S - j):
  one forward per subset of a weighted size (2^N - 1 for the full curve), O(N 2^N) arithmetic. Equals
  enumerating all N! orders (checked against brute force in tests/engine/test_budgeted_search.py).
- `beam_search`: FMM's beam (extend every beam by every remaining token, keep one order per masked set, keep
  the best `width`); width 1 is greedy recursive leave-one-out, width None keeps every set (= the exact DP).
  Under a budget a step is evaluated best parent first as far as the budget allows; the best order found
  is completed by the tokens' leave-one-out ranking.
- `widening_search` (the anytime search): polish a cheap start by short swaps, then beams of growing width (2, 3, 5, 8, ...) that
  reuse every evaluated set, then swaps of any distance with what is left (see `AnytimeAopc` in budgeted_search.py). It uses
- `local_search`: start from a cheaper search's order (greedy recursive LOO as far as the
  budget allows, by default; or LOO or a gradient ranking), evaluate its J, then swap pairs of tokens
  (positions i < j) while that improves J. A swap changes only the prefixes of sizes i+1..j, so a swap of
  neighbours costs one forward and its gain is exact; moves go nearest first and the search restarts from
  distance 1 after every improvement (variable neighbourhood descent). J only ever rises, so the result is
  never worse than the starting ranking, and it stops at a local optimum or when the budget runs out.

Every forward is counted (the unmasked input included; cached look-ups are free), and a search never spends
more than its budget.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.errors import InvalidInputError

ERASER_BINS = (0.01, 0.05, 0.10, 0.20, 0.50)  # as engine.faithfulness.erasure (not imported: no cycle)
CURVES = ("full", "eraser")
SCORES = ("probability", "logit")


def curve_weights(n: int, curve: str = "full", bins: Sequence[float] = ERASER_BINS) -> np.ndarray:
    """w [n + 1] (w[0] = 0): the weight of the prefix of size k in J. 'full': 1/n for k = 1..n; 'eraser': each
    bin k_b = round(b n) (at least 1, at most n, as `erasure.bin_count`) adds 1/|bins|."""
    if curve not in CURVES:
        raise InvalidInputError(f"unknown AOPC curve {curve!r}; use one of {', '.join(CURVES)}")
    w = np.zeros(n + 1)
    if curve == "full":
        w[1:] = 1.0 / n
    else:
        for b in bins:
            w[int(min(n, max(1, np.floor(b * n + 0.5))))] += 1.0 / len(bins)
    return w


class BudgetSpent(Exception):
    """Raised inside a search when the budget (passes or seconds) cannot pay for what it needs next."""


class SetScores:
    """g(S) for the subsets S of one input's n tokens (bitmasks over local indices 0..n-1), computed on demand
    and cached; every forward is counted against `budget` (None: unlimited) and `deadline` (time.monotonic()).

    evaluate(masks) -> s [len(masks)]: the score s of the input with each mask's tokens masked (one batched call).
    The unmasked input's s(x) is evaluated first and counts as one forward."""

    def __init__(self, n: int, evaluate: Callable[[list[int]], Sequence[float]], budget: int | None = None,
                 deadline: float | None = None, on_spend: Callable[[int], None] | None = None):
        self.n = n
        self._evaluate = evaluate
        self.budget = budget
        self.deadline = deadline
        self.on_spend = on_spend
        self.spent = 0
        self.s: dict[int, float] = {}
        self.s0 = float(self._run([0])[0])

    def remaining(self) -> float:
        return float("inf") if self.budget is None else self.budget - self.spent

    def _run(self, masks: list[int]) -> list[float]:
        values = [float(v) for v in self._evaluate(masks)]
        for m, v in zip(masks, values):
            self.s[m] = v
        self.spent += len(masks)
        if self.on_spend is not None:
            self.on_spend(len(masks))
        return values

    def known(self, mask: int) -> bool:
        return mask in self.s

    def g(self, mask: int) -> float:
        """g of a cached set (KeyError when it was never evaluated)."""
        return self.s0 - self.s[mask]

    def fetch(self, masks: Sequence[int], partial: bool = False, force: bool = False) -> int:
        """Evaluate the masks not yet cached, in the given order. All of them, or raise `BudgetSpent`; with
        `partial`, as many as the budget allows (returns how many of `masks`, from the start, are now known).
        `force`: ignore the time limit (a search's first step, without which it has no order at all)."""
        if not force and self.deadline is not None and time.monotonic() > self.deadline:
            raise BudgetSpent("out of time")
        missing = list(dict.fromkeys(m for m in masks if m not in self.s))
        room = self.remaining()
        if len(missing) > room:
            if not partial:
                raise BudgetSpent("out of forward passes")
            missing = missing[: int(room)]
        if missing:
            self._run(missing)
        known = 0
        for m in masks:
            if m not in self.s:
                break
            known += 1
        return known


def order_value(scores: SetScores, order: Sequence[int], w: np.ndarray) -> float:
    """J(order) from cached sets (KeyError when a weighted prefix was never evaluated)."""
    mask, total = 0, 0.0
    for k, p in enumerate(order, 1):
        mask |= 1 << p
        if w[k]:
            total += w[k] * scores.g(mask)
    return total


def prefix_masks(order: Sequence[int], w: np.ndarray) -> list[int]:
    """The masks of the weighted prefixes of `order`."""
    out, mask = [], 0
    for k, p in enumerate(order, 1):
        mask |= 1 << p
        if w[k]:
            out.append(mask)
    return out


def exact_bounds(scores: SetScores, w: np.ndarray) -> tuple[float, list[int], float, list[int]]:
    """(max J, its order, min J, its order) over all n! orders, by dynamic programming over the 2^n subsets
    (every subset of a weighted size is evaluated: raises `BudgetSpent` when they do not fit the budget)."""
    n = scores.n
    full = (1 << n) - 1
    sizes = [bin(m).count("1") for m in range(full + 1)]
    scores.fetch([m for m in range(1, full + 1) if w[sizes[m]]])
    hi = np.empty(full + 1)
    lo = np.empty(full + 1)
    hi_last = np.zeros(full + 1, dtype=np.int64)  # the token masked last on the best path to this set
    lo_last = np.zeros(full + 1, dtype=np.int64)
    hi[0] = lo[0] = 0.0
    for m in range(1, full + 1):
        best_h, best_l, arg_h, arg_l = -np.inf, np.inf, 0, 0
        rest = m
        while rest:
            low = rest & -rest
            j = low.bit_length() - 1
            rest ^= low
            prev = m ^ low
            if hi[prev] > best_h:
                best_h, arg_h = hi[prev], j
            if lo[prev] < best_l:
                best_l, arg_l = lo[prev], j
        gain = w[sizes[m]] * scores.g(m) if w[sizes[m]] else 0.0
        hi[m], lo[m] = best_h + gain, best_l + gain
        hi_last[m], lo_last[m] = arg_h, arg_l

    def path(last: np.ndarray) -> list[int]:
        order, m = [], full
        while m:
            j = int(last[m])
            order.append(j)
            m ^= 1 << j
        return order[::-1]

    return float(hi[full]), path(hi_last), float(lo[full]), path(lo_last)


@dataclass
class SearchResult:
    """One input's search outcome: `order` (local token indices, masked first to last), `value` = J(order)
    (NaN when some weighted prefix was never evaluated, e.g. an order completed after the budget ran out),
    `complete` (the search ran to its end, not stopped by the budget)."""

    order: list[int]
    value: float
    complete: bool
    start_value: float = float("nan")


def _value_or_nan(scores: SetScores, order: Sequence[int], w: np.ndarray) -> float:
    try:
        return order_value(scores, order, w)
    except KeyError:
        return float("nan")


def loo_order(scores: SetScores, sign: float = 1.0) -> list[int]:
    """Tokens by sign * g({t}) (cached singletons; unevaluated ones last), highest first, ties by position."""
    keys = [sign * scores.g(1 << t) if scores.known(1 << t) else -np.inf for t in range(scores.n)]
    return sorted(range(scores.n), key=lambda t: (-keys[t], t))


def beam_search(scores: SetScores, w: np.ndarray, width: int | None, sign: float = 1.0, dedup: bool = True,
                ) -> SearchResult:
    """Beam search for the order maximising sign * J (width None: unbounded). Each candidate's key is
    (sign * cumulative weighted J so far, sign * g of its current set), so steps with weight 0 (the eraser curve)
    are still guided by the current drop. dedup: keep only the best order per masked set (FMM); False keeps
    every path, as Edin et al.'s beam does. Stops cleanly when the budget runs out (see the module docstring)."""
    n = scores.n
    beams: list[tuple[float, list[int], int]] = [(0.0, [], 0)]  # (signed cumulative, order, mask)
    complete = True
    for step in range(1, n + 1):
        cands = []
        for cum, order, mask in beams:
            for p in range(n):
                if not mask >> p & 1:
                    cands.append((cum, order, mask | (1 << p), p))
        try:  # the first step (leave-one-out) always runs: the order's fallback needs it
            known = scores.fetch([c[2] for c in cands], partial=True, force=step == 1)
        except BudgetSpent:
            known = 0
        if known < len(cands):
            complete = False
        cands = cands[:known]
        if not cands:
            break
        scored = []
        for cum, order, new_mask, p in cands:
            g = sign * scores.g(new_mask)
            scored.append((cum + w[step] * g, g, order + [p], new_mask))
        if dedup:
            best: dict[int, tuple] = {}
            for c in scored:
                if c[3] not in best or (c[0], c[1]) > (best[c[3]][0], best[c[3]][1]):
                    best[c[3]] = c
            scored = list(best.values())
        scored.sort(key=lambda c: (-c[0], -c[1]))  # stable: ties keep generation order
        kept = scored if width is None else scored[:width]
        beams = [(c[0], c[2], c[3]) for c in kept]
        if not complete:
            break
    order = beams[0][1]
    if len(order) < n:
        seen = set(order)
        order = order + [t for t in loo_order(scores, sign) if t not in seen]
    return SearchResult(order=order, value=_value_or_nan(scores, order, w), complete=complete)


def local_search(scores: SetScores, w: np.ndarray, start: Sequence[int], sign: float = 1.0,
                 max_distance: int | None = None) -> SearchResult:
    """Anytime improvement of the order `start` by pair swaps (see the module docstring): sign * J never
    decreases. Returns `start` itself (value NaN) when the budget cannot even evaluate J(start)."""
    n = scores.n
    order = list(start)
    try:
        scores.fetch(prefix_masks(order, w))
    except BudgetSpent:
        return SearchResult(order=order, value=_value_or_nan(scores, order, w), complete=False)
    value = order_value(scores, order, w)
    start_value = value
    weighted = [k for k in range(1, n + 1) if w[k]]
    max_d = n - 1 if max_distance is None else min(max_distance, n - 1)
    prefix = [0] * (n + 1)  # prefix[k]: the mask of the first k tokens of `order`

    def refresh():
        m = 0
        for k, p in enumerate(order, 1):
            m |= 1 << p
            prefix[k] = m

    refresh()
    complete = True
    d = 1
    try:
        while d <= max_d:
            improved = False
            for i in range(n - d):
                j = i + d
                ks = [k for k in weighted if i < k <= j]  # prefixes holding order[i] but not order[j]
                if not ks:
                    continue
                a, b = 1 << order[i], 1 << order[j]
                new = [prefix[k] ^ a ^ b for k in ks]
                scores.fetch(new)
                gain = sum(w[k] * (scores.g(m) - scores.g(prefix[k])) for k, m in zip(ks, new))
                if sign * gain > 1e-12:
                    order[i], order[j] = order[j], order[i]
                    value += gain
                    refresh()
                    improved = True
            d = 1 if improved else d + 1
    except BudgetSpent:
        complete = False
    # the running sum drifts by rounding only; report J recomputed from the cache
    return SearchResult(order=order, value=order_value(scores, order, w), complete=complete, start_value=start_value)


# Each beam of the anytime search is this much wider than the last: 2, 3, 5, 8, 12, 18, 27, ... Denser than doubling,
# so that a budget between two widths leaves less unused (a beam cut short by the budget gives no usable order).
WIDTH_GROWTH = 1.5


def widening_search(scores: SetScores, w: np.ndarray, start: Sequence[int], max_width: int = 32) -> SearchResult:
    """The anytime search after its start (see `AnytimeAopc`): polish `start` by short swaps (distance <= 2), then
    beams of width 2, 3, 5, 8, ... (x `WIDTH_GROWTH`) up to `max_width` (each reuses every set already evaluated,
    so a width costs only the sets the narrower ones did not reach), each beam's order polished the same way when it
    beats the best so far;
    a width is started only while the budget left is at least 1.5 x what the previous width newly spent (a beam cut
    short by the budget leaves no usable order). The rest of the budget goes to unlimited swaps on the best order.
    max_width 0: swaps only. The result is never below `start`'s J once that is known."""
    best = local_search(scores, w, start, max_distance=2 if max_width >= 2 else None)
    start_value = best.start_value
    if np.isnan(best.value) or not best.complete:
        return best
    width, last_cost = 2, 0
    while width <= max_width:
        before = scores.spent
        if last_cost and scores.remaining() < 1.5 * last_cost:
            break
        cand = beam_search(scores, w, width=width)
        last_cost = scores.spent - before
        if not cand.complete:
            break
        if cand.value > best.value + 1e-12:
            polished = local_search(scores, w, cand.order, max_distance=2)
            best = polished if polished.value >= cand.value else cand
            if not polished.complete:
                break
        width = max(width + 1, math.ceil(width * WIDTH_GROWTH))
    final = local_search(scores, w, best.order)
    if np.isnan(final.value) or final.value < best.value:  # the polish found nothing, or could not even start
        final = SearchResult(order=best.order, value=best.value, complete=False)
    return SearchResult(order=final.order, value=final.value, complete=final.complete, start_value=start_value)

"""Per-input AOPC bounds and normalised AOPC (NAOPC; Edin et al., ACL 2025; docs/methods.md#naopc-and-aopc-bounds).

AOPC's attainable range differs between inputs and models, so raw values do not compare across them. For each
input, the upper bound U is the AOPC of the most comprehensive masking order and the lower bound L that of the
least comprehensive one (both over all N! orders of its N maskable tokens), and

    NAOPC = (AOPC - L) / (U - L)          0 when U = L

A ranking's comprehensiveness AOPC (most important masked first; higher = more faithful) and its sufficiency
AOPC in the authors' sense (least important masked first, the same formula; lower = more faithful) are both
normalised by the same L and U, so both lie in [0, 1] with exact bounds.

Curves (`curve`): 'full' = the authors' AOPC, (1/N) sum_{k=1..N} [p_c(x) - p_c(x with the first k masked)];
'eraser' = this tool's aopc-comprehensiveness (the mean over ERASER's bins, `erasure_metrics`), with bounds
that optimise the same binned objective: never normalise one curve's AOPC by the other's bounds.

Bounds (`method`): 'exact' by dynamic programming over all 2^N masked subsets (2^N - 1 forwards; inputs of at
most `max_exact` tokens), 'beam' by a maximising and a minimising beam of width `beam_size` sharing one cache
(beam bounds lie inside the true ones, so NAOPC can leave [0, 1] and is flagged `exact` = False), 'auto' =
exact up to `max_exact` tokens, beam beyond. Removal replaces tokens by [MASK]; units are tokens.

The exact bounds are the true optima over every order (no clipping at 0 for an input whose every order has a
negative sum of drops), and the beam keeps one path per masked set (as FMM's beam; `beam_search(dedup=False)` keeps
them all). tests/data/naopc_reference.json holds the authors' code's bounds on the toy model, which the tests
compare with; how it was made and what differs: docs/methods.md#notes-behind-the-code.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.faithfulness.erasure import ERASER_BINS
from engine.faithfulness.perturb import ranking_positions
from engine.importance.aopc_search import (
    CURVES,
    SCORES,
    SetScores,
    beam_search,
    curve_weights,
    exact_bounds,
    order_value,
    prefix_masks,
)
from engine.importance.budgeted_search import BudgetedBeam
from engine.importance.types import Call
from engine.models import Batch, Classifier

METHODS = ("auto", "exact", "beam")
MAX_EXACT = 12  # the authors' package refuses exact bounds beyond 12 features; 4095 forwards per input


@dataclass
class AopcBounds:
    """Per input (B): lower L and upper U bound of AOPC, whether they are exact, the orders that attain them
    (token positions in the batch row, masked first to last) and the forwards spent."""

    lower: np.ndarray
    upper: np.ndarray
    exact: np.ndarray
    lower_order: list[list[int]]
    upper_order: list[list[int]]
    forwards: np.ndarray
    curve: str
    options: dict = field(default_factory=dict)


@dataclass
class NaopcResult:
    """Per input (B): comprehensiveness and sufficiency AOPC of a ranking (Edin et al.'s senses), each beside its
    normalised value, with the bounds that normalised them."""

    aopc_comprehensiveness: np.ndarray
    naopc_comprehensiveness: np.ndarray
    aopc_sufficiency: np.ndarray
    naopc_sufficiency: np.ndarray
    bounds: AopcBounds

    def summary(self) -> dict[str, float]:
        """Means over inputs (NAOPC: the mean of the per-input values, as the authors average)."""
        return {"aopc-comprehensiveness": float(np.mean(self.aopc_comprehensiveness)),
                "naopc-comprehensiveness": float(np.mean(self.naopc_comprehensiveness)),
                "aopc-sufficiency": float(np.mean(self.aopc_sufficiency)),
                "naopc-sufficiency": float(np.mean(self.naopc_sufficiency)),
                "bounds-exact-share": float(np.mean(self.bounds.exact))}


def normalise(aopc, lower, upper) -> np.ndarray:
    """(aopc - lower) / (upper - lower) elementwise; 0 where upper = lower (no range: every order is alike)."""
    aopc, lower, upper = (np.asarray(v, dtype=float) for v in (aopc, lower, upper))
    span = upper - lower
    flat = np.abs(span) <= 1e-12
    return np.where(flat, 0.0, (aopc - lower) / np.where(flat, 1.0, span))


class _Rows:
    """Per-input `SetScores` for a batch: forwards batched and chunked by the budgeted-search explainer."""

    def __init__(self, classifier: Classifier, batch: Batch, target, score: str, should_stop):
        if score not in SCORES:
            raise InvalidInputError(f"unknown score {score!r}; use one of {', '.join(SCORES)}")
        self.runner = BudgetedBeam(classifier, memo=False, score=score)
        self.batch = batch.to(classifier.device)
        self.target = classifier.targets_for(self.batch, target)
        self.call = Call(batch=self.batch, target=self.target, logits=None, progress=None, should_stop=should_stop)
        mask_id = classifier.mask_token_id
        cand = self.batch.maskable & (self.batch.input_ids != mask_id)
        self.positions = [cand[i].nonzero().flatten().tolist() for i in range(len(self.batch))]
        if min(len(p) for p in self.positions) == 0:
            raise InvalidInputError("an input has no maskable token")

    def scores(self, i: int, on_spend=None) -> SetScores:
        return SetScores(len(self.positions[i]), self.runner.set_evaluator(self.call, i, self.positions[i]),
                         on_spend=on_spend)


def _bounds_one(scores: SetScores, w: np.ndarray, method: str, max_exact: int, beam_size: int
                ) -> tuple[float, list[int], float, list[int], bool]:
    n = scores.n
    if method == "exact" or (method == "auto" and n <= max_exact):
        if method == "exact" and n > max_exact:
            raise InvalidInputError(f"exact bounds need 2^{n} forwards for an input of {n} tokens (max_exact is "
                                    f"{max_exact}); use method 'beam' or 'auto', or raise max_exact")
        hi, hi_order, lo, lo_order = exact_bounds(scores, w)
        return lo, lo_order, hi, hi_order, True
    up = beam_search(scores, w, beam_size, sign=1.0)
    down = beam_search(scores, w, beam_size, sign=-1.0)
    return down.value, down.order, up.value, up.order, False


def aopc_bounds(classifier: Classifier, batch: Batch, target=None, curve: str = "full",
                bins: Sequence[float] = ERASER_BINS, method: str = "auto", max_exact: int = MAX_EXACT,
                beam_size: int = 5, score: str = "probability", progress: Callable[[int, int], None] | None = None,
                should_stop: Callable[[], bool] | None = None, _rows: _Rows | None = None) -> AopcBounds:
    """The best (U) and worst (L) attainable AOPC of every input of `batch` [B inputs]; see the module docstring.

    target: the explained class (default: the prediction); score: 'probability' (the metric's own, default) or
    'logit'; progress(done, total) in inputs; should_stop() is polled before every forward chunk."""
    if method not in METHODS:
        raise InvalidInputError(f"unknown bounds method {method!r}; use one of {', '.join(METHODS)}")
    if curve not in CURVES:
        raise InvalidInputError(f"unknown AOPC curve {curve!r}; use one of {', '.join(CURVES)}")
    if beam_size < 1:
        raise InvalidInputError(f"beam_size must be >= 1, got {beam_size}")
    rows = _rows or _Rows(classifier, batch, target, score, should_stop)
    B = len(rows.batch)
    lower, upper, exact, forwards = np.empty(B), np.empty(B), np.zeros(B, dtype=bool), np.zeros(B, dtype=np.int64)
    lo_orders, hi_orders = [], []
    for i in range(B):
        s = rows.scores(i)
        w = curve_weights(s.n, curve, bins)
        lo, lo_o, hi, hi_o, ex = _bounds_one(s, w, method, max_exact, beam_size)
        pos = rows.positions[i]
        lower[i], upper[i], exact[i], forwards[i] = lo, hi, ex, s.spent
        lo_orders.append([pos[t] for t in lo_o])
        hi_orders.append([pos[t] for t in hi_o])
        if progress is not None:
            progress(i + 1, B)
    return AopcBounds(lower=lower, upper=upper, exact=exact, lower_order=lo_orders, upper_order=hi_orders,
                      forwards=forwards, curve=curve,
                      options={"method": method, "max_exact": max_exact, "beam_size": beam_size, "score": score,
                               "bins": [float(b) for b in bins]})


def naopc(classifier: Classifier, batch: Batch, scores: torch.Tensor, target=None, curve: str = "full",
          bins: Sequence[float] = ERASER_BINS, bounds: AopcBounds | None = None, method: str = "auto",
          max_exact: int = MAX_EXACT, beam_size: int = 5, score: str = "probability",
          should_stop: Callable[[], bool] | None = None) -> NaopcResult:
    """AOPC and NAOPC of the ranking given by `scores` [B, T] (highest first, ties by position, as the erasure
    metrics rank), for comprehensiveness (most important first) and the authors' sufficiency (least first).
    Pass `bounds` (same batch, target, curve and score) to reuse them across several measures."""
    rows = _Rows(classifier, batch, target, score, should_stop)
    B, T = rows.batch.input_ids.shape
    scores = torch.as_tensor(scores).to(rows.batch.input_ids.device)
    if scores.shape != (B, T):
        raise InvalidInputError(f"scores of shape {tuple(scores.shape)} do not match the batch ({B}, {T})")
    if bounds is None:
        bounds = aopc_bounds(classifier, batch, target, curve, bins, method, max_exact, beam_size, score, _rows=rows)
    elif bounds.curve != curve or len(bounds.lower) != B:
        raise InvalidInputError(f"the bounds were computed for curve {bounds.curve!r} on {len(bounds.lower)} inputs, "
                                f"not curve {curve!r} on {B}")
    rank = ranking_positions(scores, rows.batch.maskable)
    comp, suff = np.empty(B), np.empty(B)
    for i in range(B):
        pos = rows.positions[i]
        local = {p: t for t, p in enumerate(pos)}
        # the ranking over the searched tokens (tokens already [MASK] in the input are not part of any order)
        order = [local[p] for p in sorted(pos, key=lambda p: int(rank[i, p]))]
        s = rows.scores(i)
        w = curve_weights(s.n, curve, bins)
        s.fetch(prefix_masks(order, w) + prefix_masks(order[::-1], w))
        comp[i] = order_value(s, order, w)
        suff[i] = order_value(s, order[::-1], w)
    return NaopcResult(aopc_comprehensiveness=comp, naopc_comprehensiveness=normalise(comp, bounds.lower, bounds.upper),
                       aopc_sufficiency=suff, naopc_sufficiency=normalise(suff, bounds.lower, bounds.upper),
                       bounds=bounds)


NAOPC_METRIC = "naopc-comprehensiveness"


def add_naopc(result, classifier: Classifier, batch: Batch, scores: torch.Tensor, target=None,
              method: str = "auto", max_exact: int = MAX_EXACT, beam_size: int = 5,
              should_stop: Callable[[], bool] | None = None) -> AopcBounds:
    """Put NAOPC beside the AOPC of an `erasure_metrics` result (in place): `naopc-comprehensiveness` [B] is its
    aopc-comprehensiveness normalised by bounds of the same binned objective (curve 'eraser', same bins). It rests
    on the AOPC's perturbed inputs for the MaSF share (the bound searches' own forwards carry no p-value); the
    bounds' method, share of exact bounds and forwards go to `result.options['naopc']`. Token units and [MASK]
    removal only. Returns the bounds."""
    aopc = result.values.get("aopc-comprehensiveness")
    if aopc is None:
        raise InvalidInputError("NAOPC normalises aopc-comprehensiveness: include the comprehensiveness metrics")
    if result.removal != "mask":
        raise InvalidInputError(f"NAOPC bounds are computed with [MASK] removal, not {result.removal!r}: use removal 'mask'")
    bins = result.options.get("bins", ERASER_BINS)
    bounds = aopc_bounds(classifier, batch, result.target if target is None else target, curve="eraser", bins=bins,
                         method=method, max_exact=max_exact, beam_size=beam_size, should_stop=should_stop)
    result.values[NAOPC_METRIC] = normalise(aopc, bounds.lower, bounds.upper)
    for table in (result.n_perturbed, result.n_ood, result.p_values):
        table[NAOPC_METRIC] = table["aopc-comprehensiveness"]
    result.options["naopc"] = {**bounds.options, "exact_share": float(np.mean(bounds.exact)),
                               "bound_forwards": int(bounds.forwards.sum()),
                               "mean_lower": float(np.mean(bounds.lower)), "mean_upper": float(np.mean(bounds.upper))}
    return bounds


def rank_by_both(results: dict[str, NaopcResult]) -> tuple[list[dict], float]:
    """Measures ranked by mean AOPC and by mean NAOPC (comprehensiveness; 1 = best), as Edin et al. compare
    them: (rows [{measure, aopc, naopc, rank_aopc, rank_naopc}] sorted by NAOPC, Kendall's tau between the two
    rankings; NaN with fewer than two measures). All results must share their bounds' inputs."""
    from scipy.stats import kendalltau, rankdata

    names = list(results)
    aopc = np.array([float(np.mean(results[m].aopc_comprehensiveness)) for m in names])
    norm = np.array([float(np.mean(results[m].naopc_comprehensiveness)) for m in names])
    r_a, r_n = rankdata(-aopc, method="min"), rankdata(-norm, method="min")
    rows = [{"measure": m, "aopc": float(a), "naopc": float(n), "rank_aopc": int(ra), "rank_naopc": int(rn)}
            for m, a, n, ra, rn in zip(names, aopc, norm, r_a, r_n)]
    rows.sort(key=lambda r: (r["rank_naopc"], r["measure"]))
    tau = float(kendalltau(aopc, norm).statistic) if len(names) > 1 else float("nan")
    return rows, tau

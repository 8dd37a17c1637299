"""MaSF (Matan et al. 2022, as used in FMM App. F.2): is a masked input still in distribution?

Features per input: every hidden state (embedding output and each layer) max-pooled over non-PAD
positions, [L, H] with L = layers + 1. Three disjoint parts of the calibration data fit the three
levels, so no level is judged on the data it was fitted on:

  level 1: per (layer, dim) empirical distribution; two-sided conformal p-value of a value z
           p1 = min(1, 2 (1 + min(#{fit <= z + tol}, #{fit >= z - tol})) / (N1 + 1))
           (tol = LEVEL1_RTOL x the dim's largest |value|: values that close count as ties, see below)
           combined over dims with Simes: s_l = min_i p1_(i) * H / i          -> [L]
  level 2: per layer, two-sided conformal p-value of s_l against part 2's s_l  -> p2 [L]
           Fisher: F = -2 sum_l log p2_l
  level 3: p = (1 + #{fit F >= F}) / (N3 + 1)   (large F = unusual; levels 2-3 tie within 1e-9 relative)

Conformal p-values are never 0, so no epsilon is needed inside the log (the seed code's
#{fit < z}/N gives 0 and log(0 + 1e-8) then dominates Fisher; see docs/masf.md).
Look-ups use sorted arrays and binary search (`torch.searchsorted`, O(log N) each) instead of
comparing against every calibration value.
"""
from __future__ import annotations

import numpy as np
import torch

from engine.errors import InvalidInputError


def _as_tensor(x) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x, dtype=torch.float64)


# Ties (docs/masf.md). Level-1 features are float32 hidden states: many tie exactly (the embedding layer's maxima are
# those of a few (token, position) pairs, shared by many inputs; all-[MASK] inputs of one length are equal in every
# layer), and one last-bit difference (another device, BLAS build or thread count, or another padding length) turns
# a tie into a strict inequality, which moved a tied value from the middle of a run of calibration values to beyond
# it. So values closer than a tolerance count as ties: far above float32 rounding noise, far below the spread of a
# feature. Level-2 and level-3 statistics are computed in float64 from integer counts; their tolerance only absorbs
# a last-bit difference of `log` between machines.
LEVEL1_RTOL = 1e-4  # of the largest |value| of a feature's column (float32 noise is relative to magnitude)
EXACT_RTOL = 1e-9  # levels 2 and 3


def column_tolerance(sorted_fit: torch.Tensor, rtol: float) -> torch.Tensor:
    """[D] absolute tolerance per column of sorted_fit [N, D]: rtol times the column's largest |value|."""
    return rtol * torch.maximum(sorted_fit[0].abs(), sorted_fit[-1].abs())


def conformal_two_sided(sorted_fit: torch.Tensor, values: torch.Tensor, rtol: float = 0.0) -> torch.Tensor:
    """Two-sided conformal p-values, one distribution per column, values within the column's tolerance tied.

    sorted_fit [N, D] ascending per column; values [M, D]. Returns [M, D] in (0, 1]."""
    return _conformal_of_rows(SortedRows(sorted_fit, rtol), values)


def _conformal_of_rows(rows: SortedRows, values: torch.Tensor) -> torch.Tensor:
    n = rows.fit_t.shape[1]
    return torch.clamp(2.0 * (1.0 + rows.tail_counts(values.T.contiguous())) / (n + 1.0), max=1.0).T


class SortedRows:
    """A calibration array sorted per column [N, D], laid out for look-ups once (not at every call): fit_t [D, N]
    contiguous (searchsorted works along the last dimension) and tol [D, 1], the column's tie tolerance."""

    def __init__(self, sorted_fit: torch.Tensor, rtol: float = 0.0):
        self.source = sorted_fit
        self.fit_t = sorted_fit.T.contiguous()
        self.tol = column_tolerance(sorted_fit, rtol)[:, None]

    def tail_counts(self, vals_t: torch.Tensor) -> torch.Tensor:
        """min(#{fit <= z + tol}, #{fit >= z - tol}) [D, M] (float64) for queries vals_t [D, M]: a calibration value
        within the tolerance of z counts on both sides, as an exact tie does."""
        n = self.fit_t.shape[1]
        at_most = torch.searchsorted(self.fit_t, vals_t + self.tol, right=True)  # #{fit <= z + tol}
        at_least = n - torch.searchsorted(self.fit_t, vals_t - self.tol, right=False)  # #{fit >= z - tol}
        return torch.minimum(at_most, at_least).to(torch.float64)


def _simes_of_tails(tail: torch.Tensor, n: int) -> torch.Tensor:
    """simes(p) along the last dim for p = clamp(2 (1 + tail) / (n + 1), max=1) with integer tails in [0, n]:
    by counting instead of sorting (bit-identical). Equal p-values take consecutive ranks a..b, where p K / i is
    smallest at i = b, their cumulative count; so Simes is the min over the values present of p K / (#{p' <= p})."""
    k = tail.shape[-1]
    flat = tail.reshape(-1, k).long()
    counts = torch.zeros(flat.shape[0], n + 1, dtype=torch.float64).scatter_add_(
        1, flat, torch.ones_like(flat, dtype=torch.float64))
    values = torch.clamp(2.0 * (1.0 + torch.arange(n + 1, dtype=torch.float64)) / (n + 1.0), max=1.0)
    candidate = values * k / counts.cumsum(1)
    candidate = candidate.masked_fill(counts == 0, float("inf"))
    return torch.clamp(candidate.amin(1), max=1.0).reshape(tail.shape[:-1])


def simes(p: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Simes combination min_i p_(i) * K / i along `dim` (K = size of that dim)."""
    k = p.shape[dim]
    ordered, _ = torch.sort(p, dim=dim)
    shape = [1] * p.ndim
    shape[dim] = k
    ranks = torch.arange(1, k + 1, dtype=p.dtype).reshape(shape)
    return torch.clamp((ordered * k / ranks).amin(dim=dim), max=1.0)


class MaSF:
    """Fit on calibration features [N, L, H]; `pvalues(features [M, L, H]) -> [M]`."""

    def __init__(self, parts: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3), seed: int = 0,
                 rtol: float = LEVEL1_RTOL):
        self.parts = parts
        self.seed = seed
        self.rtol = float(rtol)  # level-1 tie tolerance, relative to each feature's largest |calibration value|
        self.provenance: dict | None = None  # what calibrated it (engine.ood sets it when it fits or loads one)
        self.level1: torch.Tensor | None = None  # [N1, L*H] sorted per column
        self.level2: torch.Tensor | None = None  # [N2, L] sorted per column
        self.level3: torch.Tensor | None = None  # [N3] sorted
        self.shape: tuple[int, int] | None = None
        self._rows: dict[str, SortedRows] = {}  # level name -> its look-up layout, made once per fitted array

    @property
    def fitted(self) -> bool:
        return self.level3 is not None

    def _sorted_rows(self, name: str) -> SortedRows:
        level = getattr(self, name)
        rows = self._rows.get(name)
        if rows is None or rows.source is not level:  # made again when the level is refitted or replaced
            rows = self._rows[name] = SortedRows(level.reshape(len(level), -1), self.rtol if name == "level1" else EXACT_RTOL)
            rows.source = level  # level3 [N3] is looked up as one column [N3, 1]; the check above compares the level
        return rows

    def _simes_per_layer(self, feats: torch.Tensor) -> torch.Tensor:
        m = feats.shape[0]
        tail = self._sorted_rows("level1").tail_counts(feats.reshape(m, -1).T.contiguous()).T  # [M, L*H]
        # = simes(conformal_two_sided(level1, feats), dim=-1), by counting the integer tails instead of sorting.
        return _simes_of_tails(tail.reshape(m, *self.shape), self.level1.shape[0])  # [M, L]

    def _fisher(self, feats: torch.Tensor) -> torch.Tensor:
        p2 = _conformal_of_rows(self._sorted_rows("level2"), self._simes_per_layer(feats))  # [M, L]
        return -2.0 * torch.log(p2).sum(-1)  # [M]

    def fit(self, features) -> MaSF:
        feats = _as_tensor(features)
        if feats.ndim != 3:
            raise InvalidInputError(f"features must be [N, L, H], got shape {tuple(feats.shape)}")
        n = feats.shape[0]
        if n < 30:
            raise InvalidInputError(f"MaSF needs at least 30 calibration inputs (10 per level), got {n}")
        perm = torch.from_numpy(np.random.default_rng(self.seed).permutation(n))
        n1 = int(round(self.parts[0] * n))
        n2 = int(round(self.parts[1] * n))
        part1, part2, part3 = feats[perm[:n1]], feats[perm[n1 : n1 + n2]], feats[perm[n1 + n2 :]]
        self.shape = tuple(feats.shape[1:])
        self.level1 = torch.sort(part1.reshape(n1, -1), dim=0).values
        self.level2 = torch.sort(self._simes_per_layer(part2), dim=0).values
        self.level3 = torch.sort(self._fisher(part3)).values
        return self

    def pvalues(self, features) -> np.ndarray:
        """In-distribution p-value per input [M]: small = unlike the calibration data."""
        if not self.fitted:
            raise RuntimeError("MaSF is not fitted")
        feats = _as_tensor(features)
        if tuple(feats.shape[1:]) != self.shape:
            raise InvalidInputError(f"features of shape {tuple(feats.shape[1:])} do not match the fitted {self.shape}")
        fisher = self._fisher(feats)
        rows = self._sorted_rows("level3")
        n3 = self.level3.shape[0]
        at_least = n3 - torch.searchsorted(rows.fit_t[0], fisher - rows.tol[0], right=False)  # #{fit >= F - tol}
        return ((1.0 + at_least.to(torch.float64)) / (n3 + 1.0)).numpy()

    @staticmethod
    def dataset_pvalue(pvalues) -> float:
        """Simes over examples: one p-value for "this set of inputs is in distribution"."""
        p = torch.as_tensor(np.asarray(pvalues), dtype=torch.float64)
        return float(simes(p, dim=0))

    def state(self) -> dict[str, torch.Tensor]:
        return {"level1": self.level1, "level2": self.level2, "level3": self.level3,
                "shape": torch.tensor(self.shape), "rtol": torch.tensor([self.rtol], dtype=torch.float64)}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor], seed: int = 0) -> MaSF:
        # A state without `rtol` was fitted by code that compared exactly (before fit version 2).
        masf = cls(seed=seed, rtol=float(state["rtol"][0]) if "rtol" in state else 0.0)
        masf.level1, masf.level2, masf.level3 = (state[k].to(torch.float64) for k in ("level1", "level2", "level3"))
        masf.shape = tuple(int(v) for v in state["shape"])
        return masf


def naive_pvalues(masf: MaSF, features) -> np.ndarray:
    """The same p-values by broadcast comparison against every calibration value (O(N) per look-up):
    the reference the fast path is tested and benchmarked against."""
    feats = _as_tensor(features)
    m = feats.shape[0]

    def two_sided(fit, vals, rtol):  # fit [N, D], vals [M, D]; chunks of 32 queries keep memory bounded
        tol = rtol * fit.abs().amax(0)  # [D]
        le = torch.cat([(fit[None, :, :] <= v[:, None, :] + tol).sum(1) for v in vals.split(32)])
        ge = torch.cat([(fit[None, :, :] >= v[:, None, :] - tol).sum(1) for v in vals.split(32)])
        return torch.clamp(2.0 * (1.0 + torch.minimum(le, ge).double()) / (fit.shape[0] + 1.0), max=1.0)

    p1 = two_sided(masf.level1, feats.reshape(m, -1), masf.rtol).reshape(m, *masf.shape)
    p2 = two_sided(masf.level2, simes(p1, dim=-1), EXACT_RTOL)
    fisher = -2.0 * torch.log(p2).sum(-1)
    tol3 = EXACT_RTOL * masf.level3.abs().max()
    return ((1.0 + (masf.level3[None, :] >= fisher[:, None] - tol3).sum(1).double()) / (masf.level3.shape[0] + 1.0)).numpy()

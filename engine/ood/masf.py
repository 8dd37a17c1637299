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


def _check_features(features, minimum: int = 30) -> torch.Tensor:
    feats = _as_tensor(features)
    if feats.ndim != 3:
        raise InvalidInputError(f"features must be [N, L, H], got shape {tuple(feats.shape)}")
    if feats.shape[0] < minimum:
        raise InvalidInputError(f"MaSF needs at least {minimum} calibration inputs (10 per level), got {feats.shape[0]}")
    return feats


def _query_features(features, fitted: bool, shape: tuple[int, int] | None) -> torch.Tensor:
    """Features [M, L, H] to look up, as float64, checked against a fit: refused before fitting or of another
    [L, H] than the fit's."""
    if not fitted:
        raise RuntimeError("MaSF is not fitted")
    feats = _as_tensor(features)
    if tuple(feats.shape[1:]) != shape:
        raise InvalidInputError(f"features of shape {tuple(feats.shape[1:])} do not match the fitted {shape}")
    return feats


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
        feats = _check_features(features)
        n = feats.shape[0]
        perm = torch.from_numpy(np.random.default_rng(self.seed).permutation(n))
        n1 = int(round(self.parts[0] * n))
        n2 = int(round(self.parts[1] * n))
        return self.fit_parts(feats[perm[:n1]], feats[perm[n1 : n1 + n2]], feats[perm[n1 + n2 :]])

    def fit_parts(self, part1: torch.Tensor, part2: torch.Tensor, part3: torch.Tensor) -> MaSF:
        """Fit level 1 on part1, level 2 on part2 and level 3 on part3 (each [n_i, L, H], float64)."""
        self.shape = tuple(part1.shape[1:])
        self.level1 = torch.sort(part1.reshape(len(part1), -1), dim=0).values
        self.level2 = torch.sort(self._simes_per_layer(part2), dim=0).values
        self.level3 = torch.sort(self._fisher(part3)).values
        return self

    def level3_tail(self, features) -> torch.Tensor:
        """#{level-3 F >= F(x) - tol} [M] (float64): how many calibration inputs of part 3 look at least as unusual."""
        fisher = self._fisher(_as_tensor(features))
        rows = self._sorted_rows("level3")
        n3 = self.level3.shape[0]
        return (n3 - torch.searchsorted(rows.fit_t[0], fisher - rows.tol[0], right=False)).to(torch.float64)

    def pvalues(self, features) -> np.ndarray:
        """In-distribution p-value per input [M]: small = unlike the calibration data."""
        feats = _query_features(features, self.fitted, self.shape)
        return ((1.0 + self.level3_tail(feats)) / (self.level3.shape[0] + 1.0)).numpy()

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


DEFAULT_FOLDS = 5  # the cross-fitted MaSF the tool fits (fit version 4, docs/masf.md)


class CrossFitMaSF:
    """MaSF cross-fitted over K folds of the calibration inputs (cross-conformal, Vovk 2015): no verdict hangs on
    one division of the inputs into levels, and every calibration input ranks the final statistic.

    The inputs are permuted (`seed`) and cut into K folds. Fit k fits levels 1 and 2 on the other K-1 folds (half
    each) and ranks fold k's Fisher statistics F_k at level 3. For a query x:

        p(x)   = (1 + sum_k #{i in fold k: F_k(i) >= F_k(x)}) / (N + 1)      the p-value (pooled over folds)
        p_k(x) = (1 + #{i in fold k: F_k(i) >= F_k(x)}) / (n_k + 1)          fold k's own split-conformal p-value

    Each p_k is an exact conformal p-value of one split (P(p_k <= alpha) <= alpha); p pools their level-3 counts,
    so its false-alarm rate given the calibration scatters like a conformal p-value's on N inputs instead of N/3,
    and the division's influence is averaged over K fits. Its worst-case guarantee is weaker than one split's,
    P(p <= alpha) <= 2 alpha (Vovk 2015; Barber et al. 2021 for the same construction in regression); its measured
    false-alarm rate is about alpha (docs/masf.md). [min_k p_k, max_k p_k] (`pvalue_ranges`) is the calibration's
    own uncertainty beside each p-value. With `folds=1` it is a single split, exactly `MaSF(seed=seed)`."""

    def __init__(self, folds: int = DEFAULT_FOLDS, seed: int = 0, rtol: float = LEVEL1_RTOL):
        if folds < 1:
            raise InvalidInputError(f"folds must be at least 1 (1: one split into three parts), got {folds}")
        self.folds = int(folds)
        self.seed = seed
        self.rtol = float(rtol)
        self.provenance: dict | None = None
        self.fits: list[MaSF] = []  # fit k: levels 1-2 on the other folds, level 3 = fold k's statistics

    @property
    def fitted(self) -> bool:
        return bool(self.fits) and all(f.fitted for f in self.fits)

    @property
    def shape(self) -> tuple[int, int] | None:
        return self.fits[0].shape if self.fits else None

    @property
    def n_level3(self) -> int:
        """N: calibration inputs ranked at level 3, over all folds."""
        return sum(int(f.level3.shape[0]) for f in self.fits)

    def parts(self) -> list[list[int]]:
        """[[n1, n2, n3] per fold]: inputs per level of each fit."""
        return [[int(f.level1.shape[0]), int(f.level2.shape[0]), int(f.level3.shape[0])] for f in self.fits]

    def fit(self, features) -> CrossFitMaSF:
        feats = _check_features(features)
        if feats.shape[0] < 2 * self.folds + 2:
            raise InvalidInputError(f"{self.folds} folds need at least {2 * self.folds + 2} calibration inputs, got {feats.shape[0]}")
        if self.folds == 1:
            self.fits = [MaSF(seed=self.seed, rtol=self.rtol).fit(feats)]
            return self
        perm = np.random.default_rng(self.seed).permutation(feats.shape[0])
        folds = np.array_split(perm, self.folds)
        self.fits = []
        for k, fold in enumerate(folds):
            rest = np.concatenate([f for j, f in enumerate(folds) if j != k])  # in permuted order
            half = int(round(len(rest) / 2))
            fit = MaSF(seed=self.seed, rtol=self.rtol)
            self.fits.append(fit.fit_parts(feats[torch.from_numpy(rest[:half])], feats[torch.from_numpy(rest[half:])],
                                           feats[torch.from_numpy(fold)]))
        return self

    def _tails(self, features) -> torch.Tensor:
        """[K, M] level-3 tail counts of each fit."""
        feats = _query_features(features, self.fitted, self.shape)
        return torch.stack([f.level3_tail(feats) for f in self.fits])

    def pvalues(self, features) -> np.ndarray:
        """In-distribution p-value per input [M] (pooled over the folds): small = unlike the calibration data."""
        return ((1.0 + self._tails(features).sum(0)) / (self.n_level3 + 1.0)).numpy()

    def pvalue_ranges(self, features) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(p [M], lowest fold p-value [M], highest fold p-value [M]): the p-value and how far it moves with the
        division of the calibration inputs (each fold's own split-conformal p-value)."""
        tails = self._tails(features)
        sizes = torch.tensor([float(f.level3.shape[0]) for f in self.fits], dtype=torch.float64)[:, None]
        per_fold = (1.0 + tails) / (sizes + 1.0)
        pooled = (1.0 + tails.sum(0)) / (self.n_level3 + 1.0)
        return pooled.numpy(), per_fold.amin(0).numpy(), per_fold.amax(0).numpy()

    dataset_pvalue = staticmethod(MaSF.dataset_pvalue)

    def state(self) -> dict[str, torch.Tensor]:
        out = {"folds": torch.tensor([self.folds]), "rtol": torch.tensor([self.rtol], dtype=torch.float64),
               "shape": torch.tensor(self.shape)}
        for k, fit in enumerate(self.fits):
            out.update({f"fold{k}.level1": fit.level1, f"fold{k}.level2": fit.level2, f"fold{k}.level3": fit.level3})
        return out

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor], seed: int = 0) -> CrossFitMaSF:
        """A stored fit; one stored by a single split (before fit version 4: no `folds`) reads as one fold."""
        rtol = float(state["rtol"][0]) if "rtol" in state else 0.0
        if "folds" not in state:
            masf = cls(folds=1, seed=seed, rtol=rtol)
            masf.fits = [MaSF.from_state(state, seed=seed)]
            return masf
        masf = cls(folds=int(state["folds"][0]), seed=seed, rtol=rtol)
        shape = tuple(int(v) for v in state["shape"])
        for k in range(masf.folds):
            fit = MaSF(seed=seed, rtol=rtol)
            fit.level1, fit.level2, fit.level3 = (state[f"fold{k}.{name}"].to(torch.float64)
                                                  for name in ("level1", "level2", "level3"))
            fit.shape = shape
            masf.fits.append(fit)
        return masf


def false_alarm_interval(n_level3: int, alpha: float = 0.05, level: float = 0.95) -> tuple[float, float]:
    """Central `level` interval of the false-alarm rate P(p <= alpha | calibration) of a conformal p-value ranked
    on n_level3 inputs: for continuous statistics it is Beta(l, n + 1 - l) with l = floor(alpha (n + 1)) (the
    calibration's own uncertainty of a verdict at alpha; for the cross-fitted p-value an approximation)."""
    from scipy.stats import beta

    rank = int(np.floor(alpha * (n_level3 + 1)))
    if rank < 1:
        return 0.0, 0.0
    tail = (1.0 - level) / 2
    return float(beta.ppf(tail, rank, n_level3 + 1 - rank)), float(beta.ppf(1 - tail, rank, n_level3 + 1 - rank))


def pvalue_verdict(p: float, low: float, high: float, alpha: float = 0.05) -> str:
    """A p-value's verdict at alpha with the calibration's uncertainty beside it: whether every fold's p-value
    agrees with the pooled one's side of alpha."""
    side = "unlike the calibration inputs" if p < alpha else "like the calibration inputs"
    agree = (high < alpha) if p < alpha else (low >= alpha)
    certainty = "every fold agrees" if agree else f"folds disagree: {low:.3g} to {high:.3g} around {alpha:g}"
    return f"p = {p:.3g} ({'<' if p < alpha else '>='} {alpha:g}): {side}; folds {low:.3g}-{high:.3g}, {certainty}"


def naive_pvalues(masf: MaSF | CrossFitMaSF, features) -> np.ndarray:
    """The same p-values by broadcast comparison against every calibration value (O(N) per look-up):
    the reference the fast path is tested and benchmarked against."""
    if isinstance(masf, CrossFitMaSF):  # pooled level-3 counts: p_k (n_k + 1) - 1 is fold k's count
        sizes = [int(f.level3.shape[0]) for f in masf.fits]
        counts = sum(naive_pvalues(f, features) * (n + 1) - 1 for f, n in zip(masf.fits, sizes))
        return (1.0 + np.round(counts)) / (sum(sizes) + 1.0)
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

"""The standard erasure metrics on a fixed ranking, each with its in-distribution check (docs/methods.md#erasure-metrics).

The ranking is computed ONCE, on the unmasked input, by one importance measure (unlike recursive masking,
section 3): tokens are ordered by score, highest first (signed measures by their signed value, as recursive
masking does), ties by position; only maskable tokens take part. Probabilities are those of the explained
class c. A token is removed by replacing it with [MASK] (default) or, as a labelled option, by deleting it
(ERASER's removal: the remaining tokens close up, so positions shift).

Every perturbed input goes through the model once, batched, and that one forward pass also gives the MaSF
features (as recursive masking does; the ranking, the perturbed rows and the passes are the perturbation kernel's,
engine/faithfulness/perturb.py), so each metric value comes with the share of its perturbed inputs whose
in-distribution p-value is below 0.05. Inputs shared by several metrics (deletion at 10% and comprehensiveness
at 10% of a 10-token input, the fully masked input of insertion and of deletion at 100%) are computed once.

Metrics (N = the input's maskable tokens; "top-j" = the j highest-ranked tokens):

    comprehensiveness@k  p_c(x) - p_c(x without its top-n_k tokens)      higher = more faithful
    sufficiency@k        p_c(x) - p_c(only its top-n_k tokens kept)     lower  = more faithful
        n_k = max(1, round(k N)), k in ERASER's bins {1, 5, 10, 20, 50}% (DeYoung et al. 2020)
    aopc-comprehensiveness / aopc-sufficiency: the mean over those bins (ERASER's scorer; the paper's formula
        also counts a k = 0 bin, dividing by |B| + 1: not done here)
    deletion@r, insertion@r: p_c after removing the top floor(r N) tokens / after revealing them in a fully
        removed input, r = 0, 0.1, ..., 1 (Petsiuk et al. 2018); deletion-area (lower = more faithful) and
        insertion-area (higher = more faithful): trapezoids over r
    flip-fraction: j / N for the first j whose removal (top-j) changes the predicted class (Serrano & Smith 2019);
        1.0 and flagged (`never-flipped` = 1) when no prefix flips it. lower = more faithful
    top1-flip: 1 when removing the top-1 token changes the prediction (Chrysostomou & Aletras 2021); its mean
        over inputs is the top-1 flip rate. higher = more faithful
    soft-comprehensiveness / soft-sufficiency (Zhao & Aletras 2023): each dimension of token t's word embedding
        is kept with probability 1 - s_t (comprehensiveness) or s_t (sufficiency), dropped to 0 otherwise,
        s_t = the token's score min-max normalised over the input's maskable tokens (0.5 for all when the scores
        are all equal); the value is p_c(x) - p_c(x'), the mean over `soft_draws` Bernoulli draws (seeded per
        input). Higher / lower = more faithful, as their hard counterparts (ERASER's unclipped differences).
    soft-nc / soft-ns (Soft-NC / Soft-NS, the paper's metrics), per draw d with Delta_d = p_c(x) - p_c(x'_d):
        S0 = 1 - max(0, p_c(x) - p_c(null))        (Carton et al. 2020's sufficiency of the empty rationale)
        soft-nc = mean_d clip(max(0, Delta_d) / (1 - S0), 0, 1)           on the comprehensiveness draws
        soft-ns = mean_d clip((1 - max(0, Delta_d) - S0) / (1 - S0), 0, 1) on the sufficiency draws
        null = every position's token id replaced by the pad id (attention mask unchanged); NaN when
        1 - S0 = 0 (the null input does not lower p_c: no scale). Both higher = more faithful.
        Each input's value is the mean over its D draws (an estimate of the expectation); 1 - S0 = 0 gives NaN,
        not a small constant added; word-embedding dimensions (any architecture's `inputs_embeds`) of the maskable
        tokens only are zeroed, never [CLS]/[SEP]; s_t keeps a dimension for sufficiency, 1 - s_t for
        comprehensiveness. How this compares with the authors' code: docs/methods.md#notes-behind-the-code.
    pi-soft-nc / pi-soft-ns (pi-Soft, arXiv 2601.03089): Soft-NC / Soft-NS computed with keep probabilities s'_t =
        clip(s_t + delta, 0, 1), delta per input such that mean_t s'_t = keep_share (default 0.5) over the maskable
        tokens (`pi_keep_probability`), so every explanation keeps the same expected share of its input and a
        sparse explanation is not scored on a nearly empty input. Computed only when asked for (`--metrics
        pi-soft`); same draws' seeds, same null input, both higher = more faithful.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from engine.errors import InvalidInputError, MaskingCancelled
from engine.faithfulness.perturb import (
    KEEP,
    OOD_LEVEL,
    REMOVALS,
    REMOVE,
    checked_inputs,
    hidden_forward,
    pad_id_of,
    perturbed_passes,
    removed_positions,
    rows_per_pass,
    unit_ranking,
)
from engine.faithfulness.registry import FAMILIES, METRICS, better, family_options, kernel_families, metrics_of
from engine.models import Batch, Classifier

# The defaults are the registry's.
ERASER_BINS = family_options("comprehensiveness")["bins"]  # (0.01, 0.05, 0.10, 0.20, 0.50)
CURVE_RATIOS = family_options("deletion")["ratios"]  # 0, 0.1, ..., 1


@dataclass
class ErasureResult:
    """Erasure metrics of one measure's ranking on a batch of B inputs.

    values[name] [B]: the metric per input ('comprehensiveness@0.05', 'deletion@0.3', 'aopc-sufficiency', ...);
    n_perturbed[name] [B]: how many perturbed inputs the value rests on; n_ood[name] [B]: how many of them have
    a MaSF p-value below 0.05 (NaN without a MaSF); p_values[name]: every p-value the value rests on (flat);
    probability [B]: p_c of the unperturbed input, whose own p-value is `p_value_input` [B];
    forward_rows: perturbed inputs forwarded (each once, shared between metrics), soft_rows: those of the soft
    metrics (forwarded from embeddings); removal: 'mask' or 'delete'; target [B]; seed: the soft draws' seed.
    """

    values: dict[str, np.ndarray]
    n_perturbed: dict[str, np.ndarray]
    n_ood: dict[str, np.ndarray]
    p_values: dict[str, np.ndarray]
    probability: np.ndarray
    p_value_input: np.ndarray | None
    target: np.ndarray
    removal: str
    forward_rows: int
    soft_rows: int
    seed: int
    options: dict = field(default_factory=dict)

    def ood_share(self, name: str) -> float:
        """Share of the perturbed inputs behind metric `name` (pooled over inputs) with p < 0.05; NaN without MaSF."""
        n = float(np.sum(self.n_perturbed[name]))
        return float(np.nansum(self.n_ood[name]) / n) if n and not np.all(np.isnan(self.n_ood[name])) else float("nan")

    def summary(self) -> list[dict]:
        """One row per metric: mean over inputs, pooled MaSF share, direction, number of perturbed inputs."""
        rows = []
        for name, v in self.values.items():
            base, _, level = name.partition("@")
            rows.append({"metric": base, "level": float(level) if level else float("nan"), "value": float(np.nanmean(v)),
                         "better": better(base), "p_below_005": self.ood_share(name),
                         "n_perturbed": int(np.sum(self.n_perturbed[name])), "n_inputs": len(v)})
        return rows


def bin_count(k: float, n: int) -> int:
    """Tokens in ERASER's k bin of an n-token input: round(k n), at least 1 and at most n."""
    return int(min(n, max(1, np.floor(k * n + 0.5))))


def curve_count(r: float, n: int) -> int:
    """Tokens removed (deletion) or revealed (insertion) at ratio r of an n-token input: floor(r n)."""
    return int(np.floor(r * n + 1e-9))


def _canonical(kind: int, j: int, n: int) -> tuple[int, int]:
    """One name for one input: keeping all n tokens is removing none, keeping none is removing all n."""
    if kind == KEEP:
        if j >= n:
            return REMOVE, 0
        if j <= 0:
            return REMOVE, n
    return kind, j


def _select_families(metrics: Sequence[str] | None) -> tuple[str, ...]:
    """The kernel's families (engine/faithfulness/registry.py) that `metrics` (families or metric names) pick."""
    families = kernel_families()
    if metrics is None:  # the default: every kernel family but those computed only when asked for (pi-soft)
        return tuple(f for f in families if FAMILIES[f].default_evaluate)
    chosen = []
    for m in metrics:
        metric = METRICS.get(m)
        family = m if m in families else metric.family if metric is not None and metric.family in families else None
        if family is None:
            raise InvalidInputError(f"unknown erasure metric {m!r}; use one of {', '.join(families)} "
                                    f"(or a metric name: {', '.join(n for f in families for n in metrics_of(f))})")
        if family not in chosen:
            chosen.append(family)
    return tuple(chosen)


def _checked_options(metrics: Sequence[str] | None, removal: str, bins: Sequence[float], ratios: Sequence[float],
                     soft_draws: int) -> tuple[tuple[str, ...], list[float], list[float]]:
    """(families, bins, ratios) as erasure_metrics uses them; InvalidInputError for anything out of range."""
    if removal not in REMOVALS:
        raise InvalidInputError(f"unknown removal {removal!r}; use 'mask' (replace by [MASK]) or 'delete' (drop the token)")
    families = _select_families(metrics)
    bins = [float(k) for k in bins]
    ratios = [float(r) for r in ratios]
    if any(not 0 < k <= 1 for k in bins):
        raise InvalidInputError(f"bins must be fractions in (0, 1], got {bins}")
    if len(ratios) < 2 or ratios[0] != 0.0 or ratios[-1] != 1.0 or any(b <= a for a, b in zip(ratios, ratios[1:])):
        raise InvalidInputError("curve ratios must start at 0, increase and end at 1")
    if "soft" in families and soft_draws < 1:
        raise InvalidInputError(f"soft_draws must be >= 1, got {soft_draws}")
    return families, bins, ratios


def perturbations_needed(families: Sequence[str], n_tokens: Sequence[int], bins: Sequence[float],
                         ratios: Sequence[float]) -> list[tuple[int, int, int]]:
    """Every perturbed input the families need, as sorted unique (row, kind, j) in canonical form: metrics that
    share an input (deletion at 10% and comprehensiveness at 10% of a 10-token input) read one forward pass. The
    unperturbed input (REMOVE, 0) of every row is always included.

    Args:
        families: the metric families chosen (the registry's kernel families or a subset).
        n_tokens: units (tokens or words) per input.
        bins: ERASER's k fractions; ratios: the curves' r levels.

    Returns:
        The (row, kind, j) keys, sorted.
    """
    wanted: set[tuple[int, int, int]] = set()
    for b, n in enumerate(n_tokens):
        keys = [(REMOVE, 0)]
        for k in bins:
            if "comprehensiveness" in families:
                keys.append((REMOVE, bin_count(k, n)))
            if "sufficiency" in families:
                keys.append((KEEP, bin_count(k, n)))
        for r in ratios:
            if "deletion" in families:
                keys.append((REMOVE, curve_count(r, n)))
            if "insertion" in families:
                keys.append((KEEP, curve_count(r, n)))
        if "decision-flip" in families:
            keys.extend((REMOVE, j) for j in range(1, n + 1))
        wanted.update((b, *_canonical(kind, j, n)) for kind, j in keys)
    return sorted(wanted)


@dataclass
class _Forwarded:
    """The forward passes over the perturbed inputs: per input key, p_c, the predicted class and the MaSF
    p-value (NaN without MaSF)."""

    index: dict[tuple[int, int, int], int]
    n_tokens: list[int]
    prob: np.ndarray  # [R]
    pred: np.ndarray  # [R] int
    pval: np.ndarray  # [R]

    def lookup(self, b: int, kind: int, j: int) -> int:
        return self.index[(b, *_canonical(kind, j, self.n_tokens[b]))]

    def rest_on(self, used: list[list[int]]) -> list[np.ndarray]:
        """The p-values of the perturbed inputs each row's metric rests on."""
        return [self.pval[u] for u in used]


def _forward_perturbed(classifier: Classifier, batch: Batch, rank: torch.Tensor, unique: list[tuple[int, int, int]],
                       n_tokens: list[int], target: torch.Tensor, masf, removal: str,
                       should_stop: Callable[[], bool] | None) -> _Forwarded:
    """One forward pass per perturbed input (the kernel's `perturbed_passes`: batched, halving the rows after a CUDA
    out-of-memory error), with the MaSF features from the same pass."""
    device = classifier.device
    R = len(unique)
    rows_t = torch.tensor([u[0] for u in unique], device=device)
    kinds_t = torch.tensor([u[1] for u in unique], device=device)
    js_t = torch.tensor([u[2] for u in unique], device=device)
    prob = np.empty(R)
    pred = np.empty(R, dtype=np.int64)
    pval = np.full(R, np.nan)

    def removed_of(sl: slice) -> torch.Tensor:
        r = rows_t[sl]
        return removed_positions(rank[r], batch.maskable[r], kinds_t[sl], js_t[sl])

    for sl, r, logits in perturbed_passes(classifier, batch, rows_t, removed_of, pval, masf, removal,
                                          getattr(classifier, "infill", None), should_stop=should_stop,
                                          cancelled="the erasure metrics were cancelled"):
        probs = torch.softmax(logits.double(), -1)
        prob[sl] = probs[torch.arange(len(r), device=device), target[r]].cpu().numpy()
        pred[sl] = logits.argmax(-1).cpu().numpy()
    return _Forwarded({key: i for i, key in enumerate(unique)}, list(n_tokens), prob, pred, pval)


class _Recorder:
    """Collects each metric's per-input values and the p-values of the perturbed inputs it rests on."""

    def __init__(self, n_inputs: int, with_masf: bool):
        self.B, self.with_masf = n_inputs, with_masf
        self.values: dict[str, np.ndarray] = {}
        self.n_perturbed: dict[str, np.ndarray] = {}
        self.n_ood: dict[str, np.ndarray] = {}
        self.p_values: dict[str, np.ndarray] = {}

    def record(self, name: str, value: np.ndarray, used: list) -> None:
        """A metric's per-input values and, per input, the p-values [n] of the perturbed inputs it rests on
        (NaN without MaSF)."""
        self.values[name] = np.asarray(value, dtype=float)
        self.n_perturbed[name] = np.array([len(u) for u in used], dtype=float)
        if not self.with_masf:
            self.n_ood[name] = np.full(self.B, np.nan)
            self.p_values[name] = np.zeros(0)
        else:
            self.n_ood[name] = np.array([float(np.sum(np.asarray(u) < OOD_LEVEL)) for u in used])
            self.p_values[name] = np.concatenate([np.asarray(u, dtype=float) for u in used]) if used else np.zeros(0)


def _curve_metrics(out: _Recorder, fwd: _Forwarded, p_x: np.ndarray, prefix: str, kind: int,
                   counts: Callable[[float, int], int], levels: list[float], difference: bool, area: str | None) -> None:
    """One family read at several levels: `prefix@level` (p_x - p when `difference`, else p) for each level, then
    the area under the curve of p (trapezoid) as `area`, or without one the AOPC (mean of p_x - p) as
    `aopc-prefix`; each resting on the distinct perturbed inputs it read."""
    B = len(p_x)
    curves = np.empty((B, len(levels)))
    used_all: list[list[int]] = [[] for _ in range(B)]
    for li, level in enumerate(levels):
        used = [[fwd.lookup(b, kind, counts(level, fwd.n_tokens[b]))] for b in range(B)]
        p = np.array([fwd.prob[u[0]] for u in used])
        curves[:, li] = p
        out.record(f"{prefix}@{level:g}", p_x - p if difference else p, fwd.rest_on(used))
        for b in range(B):
            used_all[b].extend(used[b])
    distinct = fwd.rest_on([sorted(set(u)) for u in used_all])
    if area is not None:
        x = np.asarray(levels)
        out.record(area, np.sum(0.5 * np.diff(x) * (curves[:, :-1] + curves[:, 1:]), axis=1), distinct)
    else:
        out.record(f"aopc-{prefix}", np.mean(p_x[:, None] - curves, axis=1), distinct)


def _flip_metrics(out: _Recorder, fwd: _Forwarded, pred_x: np.ndarray) -> None:
    """flip-fraction, never-flipped and top1-flip: tokens removed in ranking order until the prediction changes."""
    B = len(pred_x)
    fraction, never, top1, used = np.ones(B), np.zeros(B), np.zeros(B), []
    for b, n in enumerate(fwd.n_tokens):
        seq = [fwd.lookup(b, REMOVE, j) for j in range(1, n + 1)]
        flips = [j for j, i in enumerate(seq, 1) if fwd.pred[i] != pred_x[b]]
        if flips:
            fraction[b] = flips[0] / n
            used.append(seq[: flips[0]])
        else:
            never[b] = 1.0
            used.append(seq)
        top1[b] = float(fwd.pred[seq[0]] != pred_x[b])
    out.record("flip-fraction", fraction, fwd.rest_on(used))
    out.record("never-flipped", never, fwd.rest_on(used))
    out.record("top1-flip", top1, fwd.rest_on([[u[0]] for u in used]))


@torch.no_grad()
def erasure_metrics(
    classifier: Classifier,
    batch: Batch,
    scores: torch.Tensor,
    target: torch.Tensor | Sequence[int] | None = None,
    metrics: Sequence[str] | None = None,
    masf=None,
    removal: str = "mask",
    bins: Sequence[float] = ERASER_BINS,
    ratios: Sequence[float] = CURVE_RATIOS,
    soft_draws: int = 5,
    seed: int = 0,
    should_stop: Callable[[], bool] | None = None,
    word_ids: torch.Tensor | None = None,
    word_aggregation: str = "sum",
    keep_share: float = 0.5,
) -> ErasureResult:
    """Erasure metrics of the ranking given by `scores` [B, T] (e.g. `Importance.scores`) on `batch`.

    Args:
        classifier: the model; batch: B inputs of T tokens; scores: [B, T] importance (higher = removed first).
        target: the class c whose probability is tracked (default: the predicted class of the unperturbed input).
        metrics: families to compute (default all: comprehensiveness, sufficiency, deletion, insertion,
            decision-flip, soft), or metric names (engine.faithfulness.registry) that pick their family.
        masf: a fitted MaSF; every perturbed input then gets a p-value.
        removal: 'mask' (replace by [MASK], default) or 'delete' (drop the token). See the module docstring.
        bins: ERASER's k fractions in (0, 1]; ratios: the deletion/insertion curves' levels, 0 to 1 increasing.
        soft_draws: draws per input of the soft metrics; seed: seeds them (per input, from its token ids).
        keep_share: pi-Soft's expected share of kept maskable tokens (`pi_keep_probability`).
        should_stop: polled between forward passes; True raises MaskingCancelled.
        word_ids: [B, T] whole-word units (engine.importance.levels.word_ids_of): k%, ratios and flips count words,
            a word's pieces are removed together and it ranks by `word_aggregation` of its pieces' scores. The soft
            metrics stay per token (they weigh each token's embedding by its own score).

    Returns:
        An ErasureResult: per metric name ('comprehensiveness@0.1', 'deletion-area', ...) a [B] array of values,
        the number of perturbed inputs each rests on and how many of them MaSF calls out of distribution.

    Steps: the options checked, the ranking (by token or word), the perturbed inputs the families need
    (`perturbations_needed`, deduplicated), one forward pass over them (`_forward_perturbed`), then each family
    read off those passes (`_curve_metrics`, `_flip_metrics`; the soft metrics run passes of their own).
    """
    families, bins, ratios = _checked_options(metrics, removal, bins, ratios, soft_draws)
    batch, scores, n_tokens = checked_inputs(classifier, batch, scores)
    B = batch.input_ids.shape[0]
    rank, n_tokens = unit_ranking(batch, scores, n_tokens, word_ids, word_aggregation, classifier.device)
    unique = perturbations_needed(families, n_tokens, bins, ratios)
    target = classifier.targets_for(batch, target)
    fwd = _forward_perturbed(classifier, batch, rank, unique, n_tokens, target, masf, removal, should_stop)

    p_x = np.array([fwd.prob[fwd.lookup(b, REMOVE, 0)] for b in range(B)])
    pred_x = np.array([fwd.pred[fwd.lookup(b, REMOVE, 0)] for b in range(B)])
    out = _Recorder(B, masf is not None)
    if "comprehensiveness" in families:
        _curve_metrics(out, fwd, p_x, "comprehensiveness", REMOVE, bin_count, bins, True, None)
    if "sufficiency" in families:
        _curve_metrics(out, fwd, p_x, "sufficiency", KEEP, bin_count, bins, True, None)
    if "deletion" in families:
        _curve_metrics(out, fwd, p_x, "deletion", REMOVE, curve_count, ratios, False, "deletion-area")
    if "insertion" in families:
        _curve_metrics(out, fwd, p_x, "insertion", KEEP, curve_count, ratios, False, "insertion-area")
    if "decision-flip" in families:
        _flip_metrics(out, fwd, pred_x)
    soft_rows = 0
    if "soft" in families:
        soft_rows = _soft_metrics(classifier, batch, scores, target, masf, soft_draws, seed, p_x, out.record, should_stop)
    if "pi-soft" in families:
        soft_rows += _soft_metrics(classifier, batch, scores, target, masf, soft_draws, seed, p_x, out.record,
                                   should_stop, keep=lambda sc, m: pi_keep_probability(sc, m, keep_share),
                                   names=(None, None, "pi-soft-nc", "pi-soft-ns"))
    p_input = None if masf is None else np.array([fwd.pval[fwd.lookup(b, REMOVE, 0)] for b in range(B)])
    options = {"bins": bins, "ratios": ratios, "soft_draws": int(soft_draws), "removal": removal,
               "families": list(families)}
    if "pi-soft" in families:
        options["keep_share"] = float(keep_share)
    return ErasureResult(values=out.values, n_perturbed=out.n_perturbed, n_ood=out.n_ood, p_values=out.p_values,
                         probability=p_x, p_value_input=p_input, target=target.cpu().numpy(), removal=removal,
                         forward_rows=len(unique), soft_rows=soft_rows, seed=int(seed), options=options)


def soft_keep_probability(scores: torch.Tensor, maskable: torch.Tensor) -> torch.Tensor:
    """s [B, T]: each maskable token's score min-max normalised over its input's maskable tokens to [0, 1]
    (0.5 everywhere when an input's scores are all equal); 1 on the positions that are not maskable. On
    maskable's device."""
    s = torch.nan_to_num(scores.to(maskable.device).double(), nan=0.0)
    high = s.masked_fill(~maskable, float("-inf")).amax(1, keepdim=True)
    low = s.masked_fill(~maskable, float("inf")).amin(1, keepdim=True)
    span = high - low
    norm = torch.where(span > 0, (s - low) / torch.where(span > 0, span, torch.ones_like(span)), torch.full_like(s, 0.5))
    return torch.where(maskable, norm, torch.ones_like(norm))


def pi_keep_probability(scores: torch.Tensor, maskable: torch.Tensor, keep_share: float = 0.5) -> torch.Tensor:
    """s' [B, T]: the soft keep probabilities (`soft_keep_probability`) shifted per input so that their mean over the
    input's maskable tokens is `keep_share`: s'_t = clip(s_t + delta_b, 0, 1), delta_b the unique shift that gives
    that mean (found by bisection to 1e-12); 1 off the maskable positions.

    Why: Soft-NC / Soft-NS keep token t with probability 1 - s_t / s_t, so the number of tokens kept follows the
    explanation's shape (one high score and the rest near 0 keeps almost nothing in a sufficiency draw), and two
    explanations are compared at different amounts of retained text. The pi variants (arXiv 2601.03089) match the
    expected retaining probability across explanations first; here every explanation keeps, in expectation,
    `keep_share` of the maskable tokens in both the sufficiency draws (s') and the comprehensiveness draws (1 - s'
    at keep_share 0.5). A shift keeps the explanation's order and its differences of score; a scaling could not
    reach the share when all but one normalised score is 0. Equal scores (s = 0.5) give s' = keep_share. The paper's
    own matching rule was not available offline: this is the tool's rule, stated here and in docs/evaluation.md."""
    if not 0.0 < keep_share < 1.0:
        raise InvalidInputError(f"keep_share must be in (0, 1), got {keep_share}")
    s = soft_keep_probability(scores, maskable)
    n = maskable.sum(1, keepdim=True).clamp(min=1).double()
    lo = torch.full_like(n, -1.0)
    hi = torch.full_like(n, 1.0)
    for _ in range(60):  # the mean of clip(s + d) is non-decreasing in d: 60 halvings of [-1, 1] reach 2e-18
        mid = (lo + hi) / 2
        mean = torch.where(maskable, (s + mid).clamp(0.0, 1.0), torch.zeros_like(s)).sum(1, keepdim=True) / n
        below = mean < keep_share
        lo, hi = torch.where(below, mid, lo), torch.where(below, hi, mid)
    shifted = (s + (lo + hi) / 2).clamp(0.0, 1.0)
    return torch.where(maskable, shifted, torch.ones_like(shifted))


def soft_normalised(p_x: np.ndarray, p_draws: np.ndarray, p_null: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Soft-NC, Soft-NS) [B] from p_c of the inputs p_x [B], of their soft-perturbed draws p_draws [B, 2, D]
    (comprehensiveness draws, then sufficiency draws) and of their null inputs p_null [B] (module docstring).

    Per draw, as SoftFaith's normalized_comprehensiveness_soft_ / normalized_sufficiency_soft_ compute it for their
    one draw: drop = max(0, p(x) - p(x')), NC = drop / (1 - S0) and NS = (1 - drop - S0) / (1 - S0) = 1 - NC of
    that draw, each clipped to [0, 1]; then the mean over draws. 1 - S0 = max(0, p(x) - p(null)); NaN where 0."""
    scale = np.maximum(0.0, p_x - p_null)  # 1 - S0
    scale = np.where(scale > 1e-12, scale, np.nan)[:, None]
    drop = np.maximum(0.0, p_x[:, None, None] - p_draws)  # [B, 2, D]
    nc = np.clip(drop[:, 0] / scale, 0.0, 1.0).mean(1)
    ns = np.clip(1.0 - drop[:, 1] / scale, 0.0, 1.0).mean(1)
    return nc, ns


#: Tokens per forward pass of the soft rows. Their rows are sorted by length and each pass is cut to its longest row,
#: so passes carry almost no padding, and shorter passes of sorted rows beat the 4096-token passes in input order on
#: a CPU (bench/erasure.py; docs/methods.md#notes-behind-the-code).
SOFT_PASS_TOKENS = 1024


SOFT_NAMES = ("soft-comprehensiveness", "soft-sufficiency", "soft-nc", "soft-ns")


def _soft_metrics(classifier, batch, scores, target, masf, draws, seed, p_x, record, should_stop,
                  keep=soft_keep_probability, names=SOFT_NAMES) -> int:
    """Soft comprehensiveness and sufficiency (Zhao & Aletras 2023); returns the rows forwarded.

    keep(scores, maskable) -> [B, T] gives the keep probabilities (pi_keep_probability for pi-Soft); names: the rows
    recorded for (comprehensiveness, sufficiency, NC, NS), None for a row not recorded.

    Rows, for each input b: D comprehensiveness draws, D sufficiency draws and one null input (every token id replaced
    by the pad id, SoftFaith's S(x, y, 0)), all from embeddings. All rows are sorted by the length of their input
    (stable) and forwarded in passes of about SOFT_PASS_TOKENS tokens, each cut to its longest row; the MaSF p-values
    are those of the draws (no metric value rests on the null input alone)."""
    from engine.importance.random_baseline import row_seed

    B, T = batch.input_ids.shape
    device = classifier.device
    s = keep(scores, batch.maskable)
    # Keep thresholds [B, 2, T] float32: a dimension is kept where its U(0, 1) draw is below. Comprehensiveness keeps
    # with 1 - s on the maskable tokens and always elsewhere (2 > any draw); sufficiency with s (1 off the maskable).
    thresholds = torch.stack([torch.where(batch.maskable, (1 - s).float(), torch.full_like(s, 2.0, dtype=torch.float32)),
                              s.float()], dim=1)
    words = classifier.word_embeddings(batch.input_ids)  # [B, T, H]
    H = words.shape[-1]
    null_ids = torch.full_like(batch.input_ids, pad_id_of(classifier))
    embeds = torch.empty(B * (2 * draws + 1), T, H, dtype=words.dtype, device=device)
    drawn = embeds[: B * 2 * draws].view(B, 2, draws, T, H)
    for b in range(B):
        # One generator per input, seeded by (seed, its token ids): the draws do not depend on the other rows.
        g = torch.Generator().manual_seed(row_seed(seed, batch.input_ids[b][batch.attention_mask[b].bool()]))
        u = torch.rand(2, draws, T, H, generator=g).to(device)
        torch.mul(words[b], u < thresholds[b][:, None, :, None], out=drawn[b])
    embeds[B * 2 * draws:] = classifier.word_embeddings(null_ids)
    owner = torch.cat([torch.arange(B, device=device).repeat_interleave(2 * draws), torch.arange(B, device=device)])
    positions = torch.arange(T, device=device)
    extent = (torch.where(batch.attention_mask.bool(), positions + 1, 0)).amax(1)  # [B]: last attended position + 1
    order = torch.sort(extent[owner], stable=True).indices
    R = len(owner)
    prob = np.empty(R)
    feats = None  # [R, L+1, H] MaSF features, allocated at the first pass
    step = rows_per_pass(T, device, max_tokens=SOFT_PASS_TOKENS, classifier=classifier)
    from engine.ood.features import pool_start

    pool_from = None if masf is None else pool_start(classifier, batch.maskable)
    for start in range(0, R, step):
        if should_stop is not None and should_stop():
            raise MaskingCancelled("the erasure metrics were cancelled")
        rows = order[start:start + step]
        r = owner[rows]
        logits, f = hidden_forward(classifier, batch.attention_mask[r], batch.token_type_ids[r], embeds=embeds[rows],
                                   features=masf is not None, start=None if pool_from is None else pool_from[r])
        idx = rows.cpu().numpy()
        prob[idx] = torch.softmax(logits.double(), -1)[torch.arange(len(r), device=logits.device), target[r]].cpu().numpy()
        if f is not None:
            if feats is None:
                feats = torch.empty(R, *f.shape[1:], dtype=f.dtype)
            feats[idx] = f
    n_drawn = B * 2 * draws
    pval = np.full(n_drawn, np.nan)
    if masf is not None:
        pval = masf.pvalues(feats[:n_drawn])
    p_null = prob[n_drawn:]
    prob, pval = prob[:n_drawn].reshape(B, 2, draws), pval.reshape(B, 2, draws)
    comp = p_x - prob[:, 0].mean(1)
    suff = p_x - prob[:, 1].mean(1)
    nc, ns = soft_normalised(p_x, prob, p_null)
    for name, value, which in zip(names, (comp, suff, nc, ns), (0, 1, 0, 1)):
        if name is not None:
            record(name, value, list(pval[:, which]))
    return R



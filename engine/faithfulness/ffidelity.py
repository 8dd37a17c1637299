"""F-Fidelity (Zheng et al., ICLR 2025): fidelity with stochastic removal on a model fine-tuned with random removal,
each perturbed input with its MaSF p-value (docs/methods.md#erasure-metrics).

F-Fidelity fine-tunes f into f_beta with a random beta fraction of the features removed (explanation-agnostic),
then removes explained features stochastically so that the removals stay inside that regime. A masked-fine-tuned
model of this project (FMM: half of each batch masked at r ~ U(0, 1)) already covers every removal ratio, so it is
used directly as f_beta with beta = 1 by default (the cap below is then inactive and rho = alpha); beta = 0.1 is the
paper code's preset for a model fine-tuned with at most 10% removed.

Per input with N maskable tokens, ranked once on the unmasked input (highest score first, as every erasure metric):

    S+_s = the top ceil(s N) tokens, S-_s = the bottom ceil(s N) tokens, s in `levels`
    rho_s = min(alpha, beta N / |S_s|)   (each token of S_s removed independently with probability rho_s)
    ffid-plus@s  = p_c(x) - (1/D) sum_d p_c(x without m_d),  m_d ~ Bernoulli(rho_s) over S+_s    higher = more faithful
    ffid-minus@s = the same with the masks drawn over S-_s                                      lower  = more faithful
    ffid-plus / ffid-minus: their mean over the levels (the paper's F-Fid+ / F-Fid-, probability version)
    ffid-plus-acc / ffid-minus-acc: the accuracy version, 1(pred(x) = c) - (1/D) sum_d 1(pred(x without m_d) = c),
        averaged over the levels (the paper code's default, with c the gold label)

Removal is [MASK]. The draws are seeded per input (by the seed and the input's token ids), so one input gets the
same masks whatever batch it is in. Choices where the paper and its code differ (docs/methods.md#notes-behind-the-code): ceil(sN)
rather than the code's off-by-one; the explained class c (the gold label in `evaluate`); ERASER's levels by default
(the code sweeps s = 5%, 10%, ..., 100%). Cost: B (1 + 2 D |levels|) forward rows.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.faithfulness.erasure import ERASER_BINS, ErasureResult
from engine.faithfulness.perturb import OOD_LEVEL, checked_inputs, perturbed_passes, ranking_positions, rows_per_pass
from engine.models import Batch, Classifier

ALPHA, BETA, DRAWS = 0.5, 1.0, 50
PLUS, MINUS = 0, 1
FFID_METRICS = ("ffid-plus", "ffid-minus", "ffid-plus-acc", "ffid-minus-acc")


def set_size(s: float, n: int) -> int:
    """|S_s| = ceil(s n), at least 1 and at most n."""
    return int(min(n, max(1, math.ceil(s * n - 1e-9))))


def removal_probability(alpha: float, beta: float, n: int, size: int) -> float:
    """rho = min(alpha, beta n / |S|): removals stay within the fine-tuning regime (about beta n tokens at most)."""
    return float(min(alpha, beta * n / size))


def draw_removals(rank: torch.Tensor, n: int, levels: Sequence[float], alpha: float, beta: float, draws: int,
                  generator: torch.Generator) -> tuple[torch.Tensor, np.ndarray]:
    """Masks of one input: removed [L, 2, D, T] bool (PLUS: over the top set, MINUS: over the bottom set) and
    rho [L]. rank [T]: 0 for the highest-ranked maskable token ... n - 1; >= T on positions that are not maskable."""
    T = rank.shape[0]
    sizes = [set_size(s, n) for s in levels]
    rho = np.array([removal_probability(alpha, beta, n, k) for k in sizes])
    top = torch.stack([rank < k for k in sizes])  # [L, T]
    bottom = torch.stack([(rank >= n - k) & (rank < n) for k in sizes])
    sets = torch.stack([top, bottom], dim=1)  # [L, 2, T]
    u = torch.rand(len(levels), 2, draws, T, generator=generator)
    return (u < torch.as_tensor(rho, dtype=u.dtype)[:, None, None, None]) & sets[:, :, None, :], rho


@torch.no_grad()
def ffidelity(classifier: Classifier, batch: Batch, scores: torch.Tensor, target=None, masf=None,
              alpha: float = ALPHA, beta: float = BETA, draws: int = DRAWS, levels: Sequence[float] = ERASER_BINS,
              seed: int = 0, should_stop: Callable[[], bool] | None = None) -> ErasureResult:
    """F-Fidelity of the ranking `scores` [B, T] on `batch` (module docstring) as an ErasureResult: values per
    input for ffid-plus@s, ffid-minus@s and the four level means, each with the MaSF p-values of its draws."""
    from engine.importance.random_baseline import row_seed

    if not 0 < alpha <= 1 or not 0 < beta <= 1:
        raise InvalidInputError(f"alpha and beta must lie in (0, 1], got alpha={alpha}, beta={beta}")
    if draws < 1:
        raise InvalidInputError(f"draws must be >= 1, got {draws}")
    levels = [float(s) for s in levels]
    if not levels or any(not 0 < s <= 1 for s in levels):
        raise InvalidInputError(f"levels must be fractions in (0, 1], got {levels}")
    device = classifier.device
    batch, scores, n_tokens = checked_inputs(classifier, batch, scores)
    B, T = batch.input_ids.shape
    maskable = batch.maskable
    rank = ranking_positions(scores, maskable).cpu()
    target = classifier.targets_for(batch, target)
    L = len(levels)
    per = 1 + 2 * L * draws  # rows per input: the input itself, then its draws [L, 2, D]
    removed = torch.zeros(B, per, T, dtype=torch.bool)
    rhos = np.empty((B, L))
    for b in range(B):
        g = torch.Generator().manual_seed(row_seed(seed, batch.input_ids[b][batch.attention_mask[b].bool()]))
        masks, rhos[b] = draw_removals(rank[b], n_tokens[b], levels, alpha, beta, draws, g)
        removed[b, 1:] = masks.reshape(-1, T)
    R = B * per
    owner = torch.arange(B).repeat_interleave(per)
    flat = removed.reshape(R, T)
    prob, pred, pval = np.empty(R), np.empty(R, dtype=np.int64), np.full(R, np.nan)
    # Every draw replaces its removed tokens by [MASK] (no infill operator), in passes sized without the model.
    for sl, r, logits in perturbed_passes(classifier, batch, owner.to(device), lambda sl: flat[sl].to(device), pval,
                                          masf, "mask", None, step=rows_per_pass(T, device), should_stop=should_stop,
                                          cancelled="F-Fidelity was cancelled"):
        probs = torch.softmax(logits.double(), -1)
        prob[sl] = probs[torch.arange(len(r), device=probs.device), target[r]].cpu().numpy()
        pred[sl] = logits.argmax(-1).cpu().numpy()
    prob, pred, pval = prob.reshape(B, per), pred.reshape(B, per), pval.reshape(B, per)
    p_x = prob[:, 0]
    hit_x = (pred[:, 0] == target.cpu().numpy()).astype(float)
    p_d = prob[:, 1:].reshape(B, L, 2, draws)
    hit_d = (pred[:, 1:] == target.cpu().numpy()[:, None]).astype(float).reshape(B, L, 2, draws)
    pv = pval[:, 1:].reshape(B, L, 2, draws)
    values, n_pert, n_ood, p_all = {}, {}, {}, {}

    def record(name: str, value: np.ndarray, used: np.ndarray) -> None:
        """used [B, k]: the p-values of the draws the value rests on."""
        values[name] = np.asarray(value, dtype=float)
        n_pert[name] = np.full(B, float(used.shape[1]))
        n_ood[name] = np.full(B, np.nan) if masf is None else (used < OOD_LEVEL).sum(1).astype(float)
        p_all[name] = np.zeros(0) if masf is None else used.reshape(-1)

    for side, name in ((PLUS, "ffid-plus"), (MINUS, "ffid-minus")):
        for li, s in enumerate(levels):
            record(f"{name}@{s:g}", p_x - p_d[:, li, side].mean(-1), pv[:, li, side])
        used = pv[:, :, side].reshape(B, -1)
        record(name, (p_x[:, None] - p_d[:, :, side].mean(-1)).mean(1), used)
        record(f"{name}-acc", (hit_x[:, None] - hit_d[:, :, side].mean(-1)).mean(1), used)
    return ErasureResult(values=values, n_perturbed=n_pert, n_ood=n_ood, p_values=p_all, probability=p_x,
                         p_value_input=None if masf is None else pval[:, 0], target=target.cpu().numpy(),
                         removal="mask", forward_rows=R, soft_rows=0, seed=int(seed),
                         options={"alpha": alpha, "beta": beta, "draws": int(draws), "levels": levels,
                                  "set_size": "ceil(s N)", "mean_rho": float(rhos.mean())})


def add_ffidelity(result: ErasureResult, classifier: Classifier, batch: Batch, scores: torch.Tensor, target=None,
                  masf=None, should_stop: Callable[[], bool] | None = None, **options) -> ErasureResult:
    """Put F-Fidelity's metrics beside an `erasure_metrics` result (in place; same batch, scores and target);
    its settings go to `result.options['ffidelity']`. Returns the F-Fidelity result."""
    ff = ffidelity(classifier, batch, scores, target=target, masf=masf, seed=result.seed, should_stop=should_stop,
                   **options)
    for mine, theirs in ((result.values, ff.values), (result.n_perturbed, ff.n_perturbed), (result.n_ood, ff.n_ood),
                         (result.p_values, ff.p_values)):
        mine.update(theirs)
    result.forward_rows += ff.forward_rows
    result.options["ffidelity"] = ff.options
    return ff

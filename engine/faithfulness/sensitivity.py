"""Max- and avg-sensitivity (Yeh et al., NeurIPS 2019, "On the (in)fidelity and sensitivity of explanations"), the
max computed by captum's implementation (`captum.metrics.sensitivity_max`) with a token neighbourhood, the avg
(which captum lacks) as the mean over the same neighbours, from the same explanations: properties of the
explanation's robustness, not of its faithfulness (docs/evaluation.md).

    max-sensitivity = max  over `samples` neighbours x' of ||phi(x') - phi(x)|| / ||phi(x)||      lower = more stable
    avg-sensitivity = mean over the same neighbours of the same ratio                             lower = more stable

A neighbour x' is x with `tokens` (default 1) of its maskable tokens, drawn at random (seeded per input), replaced by
the operator's replacement token ([MASK], or unk / pad); phi is the measure re-run on x' (the family needs the
measure itself, not only its scores: `explain`), compared over the maskable positions (Frobenius norm; captum's
rule: ||phi(x)|| = 0 counts as 1). A constant explanation has sensitivity 0. Removal by deletion is refused (the
positions would shift). Every neighbour gets a MaSF p-value (one extra forward each when a MaSF is given).

How captum's function is fed: its `inputs` are [B, T + 1] floats, 1 on each position and the input's row number in
the last column; the perturbation function sets `tokens` of a row's maskable positions to 0 (the last column never);
the explanation function reads the row number, replaces the absent tokens and re-runs the measure. Cost: the
measure's own cost, 1 + samples times per input, plus `samples` forward rows for the MaSF p-values.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.faithfulness.perturb import OOD_LEVEL, checked_inputs
from engine.faithfulness.registry import MetricValues
from engine.faithfulness.subsets import fixed_size_subsets, forward_removed
from engine.models import Batch, Classifier

METRIC = "max-sensitivity"
AVG = "avg-sensitivity"


def max_sensitivity(classifier: Classifier, batch: Batch, scores: torch.Tensor, target=None, *,
                    explain: Callable[[Batch, torch.Tensor], torch.Tensor] | None = None, masf=None,
                    removal: str = "mask", seed: int = 0, should_stop: Callable[[], bool] | None = None,
                    samples: int = 10, tokens: int = 1) -> MetricValues:
    """Max- and avg-sensitivity [B] of the measure `explain(batch, target) -> scores [B, T]` on `batch` (module
    docstring); `scores` [B, T] are its scores of the unperturbed batch (checked for shape; captum re-explains x
    itself). The avg is the mean over the neighbours captum drew and explained (recorded as it calls the measure)."""
    from captum.metrics import sensitivity_max

    if explain is None:
        raise InvalidInputError("max-sensitivity re-runs the measure on perturbed inputs: pass explain=")
    if removal != "mask":
        raise InvalidInputError(f"max-sensitivity replaces tokens (operator 'mask', unk, pad), not {removal!r}")
    if samples < 1 or tokens < 1:
        raise InvalidInputError(f"samples and tokens must be >= 1, got {samples} and {tokens}")
    batch, scores, n_tokens = checked_inputs(classifier, batch, scores)
    target = classifier.targets_for(batch, target)
    B, T = batch.input_ids.shape
    maskable = batch.maskable.cpu()
    present = torch.cat([torch.ones(B, T, dtype=torch.float64), torch.arange(B, dtype=torch.float64)[:, None]], 1)
    drawn: list[torch.Tensor] = []
    explained: list[tuple[torch.Tensor, torch.Tensor]] = []  # (rows [R], phi [R, T]) of each call, x itself first

    def perturb(inputs: torch.Tensor, perturb_radius: float = 0.0) -> torch.Tensor:
        inputs = inputs[0] if isinstance(inputs, tuple) else inputs  # captum passes its one input as a 1-tuple
        rows = inputs[:, -1].long()
        out = inputs.clone()
        for b in torch.unique_consecutive(rows).tolist():
            at = torch.nonzero(rows == b).flatten()
            gone = fixed_size_subsets(batch, b, len(at), min(tokens, n_tokens[b]), seed)
            out[at, :T] = torch.where(gone, 0.0, out[at, :T])
        drawn.append(out)
        return out

    def explanation(inputs: torch.Tensor) -> tuple[torch.Tensor]:
        inputs = inputs[0] if isinstance(inputs, tuple) else inputs
        rows = inputs[:, -1].long()
        removed = (inputs[:, :T] < 0.5).to(batch.input_ids.device)
        sub = batch.select(rows.to(batch.input_ids.device))
        sub = sub.with_ids(torch.where(removed, torch.full_like(sub.input_ids, classifier.mask_token_id),
                                       sub.input_ids))
        with torch.enable_grad():  # captum calls this under no_grad; gradient measures need it
            phi = explain(sub, target[rows.to(target.device)])
        phi = torch.nan_to_num(torch.as_tensor(phi).detach().double().cpu(), nan=0.0)
        phi = torch.where(maskable[rows], phi, torch.zeros_like(phi))
        explained.append((rows.cpu(), phi))
        return (torch.cat([phi, torch.zeros(len(rows), 1, dtype=torch.float64)], 1),)  # a tuple, as its inputs are

    values = sensitivity_max(explanation, present, perturb_func=perturb, n_perturb_samples=samples).double().numpy()
    if len(drawn) != 1:
        raise RuntimeError("captum.metrics.sensitivity_max did not perturb the inputs in one call")
    avg = _mean_sensitivity(explained, B)
    removed = drawn[0][:, :T] < 0.5
    pval = np.full(B * samples, np.nan)
    if masf is not None:
        _, pval = forward_removed(classifier, batch, drawn[0][:, -1].long(), removed, target, masf, removal,
                                  should_stop=should_stop)
    pval = pval.reshape(B, samples)
    n_ood = (pval < OOD_LEVEL).sum(1).astype(float) if masf is not None else np.full(B, np.nan)
    return MetricValues(values={METRIC: values, AVG: avg},
                        n_perturbed={METRIC: np.full(B, float(samples)), AVG: np.full(B, float(samples))},
                        n_ood={METRIC: n_ood, AVG: n_ood},
                        p_values={m: pval.ravel() if masf is not None else np.zeros(0) for m in (METRIC, AVG)},
                        forward_rows=B * samples if masf is not None else 0,
                        options={"max_sensitivity": {"samples": samples, "tokens": tokens, "removal": removal,
                                                     "seed": seed, "implementation": "captum.metrics.sensitivity_max; "
                                                     "avg: the mean over the same neighbours"}})


def _mean_sensitivity(explained: list[tuple[torch.Tensor, torch.Tensor]], B: int) -> np.ndarray:
    """[B] the mean over each input's neighbours of ||phi(x') - phi(x)|| / ||phi(x)|| (Frobenius; captum's rule:
    ||phi(x)|| = 0 counts as 1), from the explanations recorded in call order: x itself first, then the neighbours."""
    if len(explained) < 2:
        raise RuntimeError("captum.metrics.sensitivity_max did not explain the inputs and then their neighbours")
    rows0, phi0 = explained[0]
    if not torch.equal(rows0, torch.arange(B)):
        raise RuntimeError("captum.metrics.sensitivity_max did not explain the unperturbed inputs first")
    rows = torch.cat([r for r, _ in explained[1:]])
    phi = torch.cat([p for _, p in explained[1:]])
    base = phi0.norm(dim=1)
    base = torch.where(base == 0, torch.ones_like(base), base)
    ratio = (phi - phi0[rows]).norm(dim=1) / base[rows]
    total = torch.zeros(B, dtype=torch.float64).index_add_(0, rows, ratio)
    count = torch.zeros(B, dtype=torch.float64).index_add_(0, rows, torch.ones_like(ratio))
    return (total / count).numpy()

"""Infidelity (Yeh et al., NeurIPS 2019, "On the (in)fidelity and sensitivity of explanations") with token-subset
perturbations, computed by captum's implementation (`captum.metrics.infidelity`):

    infidelity = E_I[(I . phi - (f(x) - f(x with the tokens of I removed)))^2]          lower = more faithful

I is the indicator [T] of a random subset of the maskable tokens, each removed independently with probability
`removal_probability` (default 0.2), `samples` draws per input (default 20); f is the explained class's probability
(default) or logit (`output='logit'`). For a model additive in f under removal and its exact attributions the
difference is 0 on every draw: infidelity 0. normalize=True is captum's: phi scaled by the beta that minimises the
expected error first (Yeh et al.'s normalised infidelity), so only the shape of phi is judged.

How captum's function is fed: its `inputs` are [B, T + 1] floats, 1 on each position (the token is present) and the
input's row number in the last column; the perturbation function returns (I, inputs - I) with I drawn from the
input's own seeded generator (subsets.bernoulli_subsets) and never on the last column; the forward function reads
the row number, removes the absent tokens by the operator (subsets.forward_removed: every perturbed input gets its
MaSF p-value) and returns f. Attributions are phi with a 0 for the last column. Cost: 1 + samples forward rows per
input (captum forwards the unperturbed inputs once per call), no backward.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.faithfulness.perturb import OOD_LEVEL, checked_inputs
from engine.faithfulness.registry import MetricValues
from engine.faithfulness.subsets import bernoulli_subsets, check_output, forward_removed
from engine.models import Batch, Classifier

METRIC = "infidelity"


def infidelity(classifier: Classifier, batch: Batch, scores: torch.Tensor, target=None, *, masf=None,
               removal: str = "mask", seed: int = 0, should_stop: Callable[[], bool] | None = None,
               samples: int = 20, removal_probability: float = 0.2, normalize: bool = False,
               output: str = "probability") -> MetricValues:
    """Infidelity [B] of `scores` [B, T] on `batch` (module docstring), with the MaSF share of its perturbed inputs.
    target: the explained class (default: the predicted one)."""
    from captum.metrics import infidelity as captum_infidelity

    if samples < 1:
        raise InvalidInputError(f"infidelity needs at least 1 sample, got {samples}")
    if not 0 < removal_probability < 1:
        raise InvalidInputError(f"removal_probability must be in (0, 1), got {removal_probability}")
    check_output(output, removal)
    batch, scores, _ = checked_inputs(classifier, batch, scores)
    target = classifier.targets_for(batch, target)
    B, T = batch.input_ids.shape
    phi = torch.nan_to_num(scores.detach().double().cpu(), nan=0.0)
    present = torch.cat([torch.ones(B, T, dtype=torch.float64), torch.arange(B, dtype=torch.float64)[:, None]], 1)
    attributions = torch.cat([phi, torch.zeros(B, 1, dtype=torch.float64)], 1)
    calls: list[tuple[torch.Tensor, np.ndarray]] = []  # (inputs, p-values) of each forward call
    drawn: list[torch.Tensor] = []

    def perturb(inputs: torch.Tensor):
        rows = inputs[:, -1].long()
        perturbation = torch.zeros_like(inputs)
        for b in torch.unique_consecutive(rows).tolist():
            at = torch.nonzero(rows == b).flatten()
            perturbation[at, :T] = bernoulli_subsets(batch, b, len(at), removal_probability, seed).double()
        drawn.append(inputs - perturbation)
        return perturbation, drawn[-1]

    def forward(inputs: torch.Tensor) -> torch.Tensor:
        rows = inputs[:, -1].long()
        f, pval = forward_removed(classifier, batch, rows, inputs[:, :T] < 0.5, target, masf, removal, output,
                                  should_stop)
        calls.append((inputs, pval))
        return torch.as_tensor(f)

    values = captum_infidelity(forward, perturb, present, attributions, n_perturb_samples=samples,
                               normalize=normalize).double().numpy()
    # the p-values of the perturbed inputs: the forward call whose inputs are the perturbation's output
    perturbed = [p for x, p in calls if drawn and x.shape == drawn[0].shape and torch.equal(x, drawn[0])]
    if len(drawn) != 1 or not perturbed:
        raise RuntimeError("captum.metrics.infidelity did not forward the perturbed inputs in one call")
    pval = perturbed[0].reshape(B, samples)
    n_ood = (pval < OOD_LEVEL).sum(1).astype(float) if masf is not None else np.full(B, np.nan)
    return MetricValues(values={METRIC: values}, n_perturbed={METRIC: np.full(B, float(samples))},
                        n_ood={METRIC: n_ood}, p_values={METRIC: pval.ravel() if masf is not None else np.zeros(0)},
                        forward_rows=B * (samples + 1),
                        options={"infidelity": {"samples": samples, "removal_probability": removal_probability,
                                                "normalize": normalize, "output": output, "removal": removal,
                                                "seed": seed, "implementation": "captum.metrics.infidelity"}})

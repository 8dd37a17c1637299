"""Random token subsets removed by a removal operator, forwarded with their MaSF p-values: the perturbation of the
metric families beyond erasure (faithfulness correlation, infidelity; as in docs/evaluation.md: for text a perturbation
is a set of tokens masked or replaced, never noise on token ids).

The subsets are drawn per input from a generator seeded by (seed, the input's token ids), so an input gets the same
subsets whatever batch it is in. Removal is the kernel's (perturb.perturbed_rows): 'mask' replaces a token
by the classifier's replacement token ([MASK], or an operator's unk / pad / [REDACTED]), 'delete' drops it.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.faithfulness.perturb import REMOVALS, perturbed_passes
from engine.models import Batch, Classifier

OUTPUTS = ("probability", "logit")


def input_generator(seed: int, batch: Batch, b: int) -> torch.Generator:
    """The generator of input b's draws: seeded by `seed` and its real token ids (not by its place in the batch)."""
    from engine.importance.random_baseline import row_seed

    return torch.Generator().manual_seed(row_seed(seed, batch.input_ids[b][batch.attention_mask[b].bool()].cpu()))


def fixed_size_subsets(batch: Batch, b: int, n_subsets: int, size: int, seed: int) -> torch.Tensor:
    """[n_subsets, T] bool: subsets of `size` of input b's maskable positions, each drawn uniformly (without
    replacement within a subset)."""
    T = batch.input_ids.shape[1]
    positions = torch.nonzero(batch.maskable[b].cpu()).flatten()
    g = input_generator(seed, batch, b)
    out = torch.zeros(n_subsets, T, dtype=torch.bool)
    for s in range(n_subsets):
        out[s, positions[torch.randperm(len(positions), generator=g)[:size]]] = True
    return out


def bernoulli_subsets(batch: Batch, b: int, n_subsets: int, probability: float, seed: int) -> torch.Tensor:
    """[n_subsets, T] bool: each maskable position of input b removed independently with `probability`."""
    g = input_generator(seed, batch, b)
    draws = torch.rand(n_subsets, batch.input_ids.shape[1], generator=g) < probability
    return draws & batch.maskable[b].cpu()[None, :]


def class_output(logits: torch.Tensor, target: torch.Tensor, output: str) -> np.ndarray:
    """[R] the explained class's probability (softmax, float64) or logit."""
    rows = torch.arange(len(target), device=logits.device)
    if output == "logit":
        return logits.double()[rows, target].cpu().numpy()
    return torch.softmax(logits.double(), -1)[rows, target].cpu().numpy()


def check_output(output: str, removal: str) -> None:
    if output not in OUTPUTS:
        raise InvalidInputError(f"unknown output {output!r}; use one of {', '.join(OUTPUTS)}")
    if removal not in REMOVALS:
        raise InvalidInputError(f"unknown removal {removal!r}; use 'mask' (the operator's replacement) or 'delete'")


@torch.no_grad()
def forward_removed(classifier: Classifier, batch: Batch, rows: torch.Tensor, removed: torch.Tensor,
                    target: torch.Tensor, masf=None, removal: str = "mask", output: str = "probability",
                    should_stop: Callable[[], bool] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(f [R], MaSF p-values [R], NaN without MaSF) of R perturbed inputs: batch row rows[r] with the positions
    removed[r] [R, T] removed; f is the explained class target[rows[r]]'s probability or logit (`output`). The
    kernel's passes (`perturb.perturbed_passes`); the features come from the same pass."""
    check_output(output, removal)
    device = classifier.device
    rows, removed = rows.to(device), removed.to(device)
    R = removed.shape[0]
    f, pval = np.empty(R), np.full(R, np.nan)
    for sl, r, logits in perturbed_passes(classifier, batch, rows, lambda sl: removed[sl], pval, masf, removal,
                                          getattr(classifier, "infill", None), should_stop=should_stop):
        f[sl] = class_output(logits, target[r], output)
    return f, pval

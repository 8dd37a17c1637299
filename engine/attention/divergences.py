"""Distances between explanations and between predictions, as W&P use them (natural logarithms)."""
from __future__ import annotations

import numpy as np
import torch


def tvd(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Total variation distance 1/2 sum |p - q| along the last axis."""
    return 0.5 * (p - q).abs().sum(-1)


def kl(p: torch.Tensor, q: torch.Tensor, eps: float = 1e-10) -> torch.Tensor:
    """KL(p || q) along the last axis; terms with p = 0 contribute 0."""
    return torch.where(p > 0, p * (torch.log(p + eps) - torch.log(q + eps)), torch.zeros_like(p)).sum(-1)


def jsd(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence (natural log, so in [0, ln 2]) along the last axis."""
    m = 0.5 * (p + q)
    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


def as_tensor(x) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x), dtype=torch.float64)

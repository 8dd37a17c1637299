"""What the benches share to time GPU work honestly (a helper, not an entry: its name starts with "_")."""
from __future__ import annotations

import torch


def sync() -> None:
    """Wait for the GPU's queued kernels (a CUDA call returns before its work is done: a clock stopped without this
    times the launch); nothing on a CPU-only machine or before CUDA is initialised."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()

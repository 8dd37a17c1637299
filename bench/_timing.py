"""What the benches share to time work honestly (a helper, not an entry: its name starts with "_"): the GPU's queue
waited for, and the Explain page's live bundle timed the two ways it can run."""
from __future__ import annotations

import torch


def sync() -> None:
    """Wait for the GPU's queued kernels (a CUDA call returns before its work is done: a clock stopped without this
    times the launch); nothing on a CPU-only machine or before CUDA is initialised."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def live_bundle(classifier, batch):
    """The Explain page's measures (LIVE_MEASURES) on `batch`, ready to time: (the explainers sharing one memo,
    bundle() running them from an empty memo, separately() running memo-less copies one by one)."""
    from engine.explain import LIVE_MEASURES
    from engine.importance import clear_memo, get_explainer

    explainers = [get_explainer(m, classifier) for m in LIVE_MEASURES]
    alone = [get_explainer(m, classifier, memo=False) for m in LIVE_MEASURES]

    def bundle():
        clear_memo(classifier.model)
        for ex in explainers:
            ex.attribute(batch)

    def separately():
        for ex in alone:
            ex.attribute(batch)

    return explainers, bundle, separately

"""What an explanation costs: wall time and the rows that went through the model (docs/methods.md#sanity-checks-and-cost, cost).

Rows are counted by a forward pre-hook on the model, so every measure is counted the same way whatever its own
batching: a row with gradient enabled counts as forward+backward (the measures that take gradients call
backward on every such pass), one without as forward only.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class RowCounter:
    """Rows that went through the model: `forward` without gradient, `backward` with one (forward+backward)."""

    forward: int = 0
    backward: int = 0


@contextmanager
def counting_rows(model):
    """Count the rows of every forward call of `model` while inside the block; yields a RowCounter."""
    import torch

    counter = RowCounter()

    def hook(_module, args, kwargs):
        x = kwargs.get("input_ids")
        if x is None:
            x = kwargs.get("inputs_embeds")
        if x is None and args:
            x = args[0]
        n = int(x.shape[0]) if x is not None else 0
        if torch.is_grad_enabled():
            counter.backward += n
        else:
            counter.forward += n

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield counter
    finally:
        handle.remove()


class CostMeter:
    """Wraps an explainer's `attribute` so that every call's wall time, inputs and model rows are added up.

        meter = CostMeter(classifier.counted_module)
        explainer.attribute = meter.wrap(explainer.attribute)
        ... recursive masking / a sweep ...
        meter.summary()   # seconds, rows and explanations (inputs explained) in total and per explanation
    """

    def __init__(self, model):
        self.model = model
        self.seconds = 0.0
        self.explanations = 0
        self.rows = RowCounter()

    def wrap(self, attribute):
        def timed(batch, *args, **kwargs):
            with counting_rows(self.model) as rows:
                start = time.perf_counter()
                out = attribute(batch, *args, **kwargs)
                self.seconds += time.perf_counter() - start
            self.rows.forward += rows.forward
            self.rows.backward += rows.backward
            self.explanations += len(batch)
            return out
        return timed

    def summary(self) -> dict:
        n = max(1, self.explanations)
        return {"explanations": self.explanations, "seconds": round(self.seconds, 3),
                "seconds_per_explanation": self.seconds / n, "forward_rows_per_explanation": self.rows.forward / n,
                "backward_rows_per_explanation": self.rows.backward / n}

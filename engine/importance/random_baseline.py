"""`random`: the baseline every faithfulness curve is compared with."""
from __future__ import annotations

import hashlib

import torch

from engine.importance.explainer import Explainer, PassEstimate
from engine.importance.registry import register
from engine.importance.types import Call


def row_seed(seed: int, ids: torch.Tensor) -> int:
    """A 63-bit seed from the measure's seed and one row's token ids."""
    h = hashlib.blake2b(digest_size=8)
    h.update(str(int(seed)).encode() + b"|")
    h.update(ids.detach().cpu().contiguous().numpy().tobytes())
    return int.from_bytes(h.digest(), "little") >> 1


@register
class RandomImportance(Explainer):
    """random: U(0, 1) per token, seeded, drawn afresh for every distinct input.

    The draw of row b comes from a generator seeded with hash(seed, token ids of row b without padding): reproducible,
    independent of the other rows of the batch, and redrawn at every recursive masking step because the
    (partly masked) input changes (docs/methods.md#importance-measures: drawn anew at every recursive step). Unit: none."""

    name = "random"
    cost_tier = 0
    seeding = "cell"
    model_independent = True
    signed = False
    defaults = {"seed": 0}
    # whole-word masking ranks a word by its first piece's draw: one uniform per word, so long words are not
    # favoured (a sum of draws would rank them first)
    word_aggregation = "first"

    def passes(self, n_tokens: int) -> PassEstimate:
        return PassEstimate(forward=0)

    def _scores(self, call: Call):
        b = call.batch
        B, T = b.input_ids.shape
        out = torch.empty(B, T)
        out.zero_()
        for i in range(B):
            real = b.input_ids[i][b.attention_mask[i].bool()]  # padding does not change the draw
            g = torch.Generator().manual_seed(row_seed(self.seed, real))
            out[i, : real.numel()] = torch.rand(real.numel(), generator=g)
        return out.to(b.device), {}

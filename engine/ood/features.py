"""The features MaSF looks at: every hidden state, max-pooled over real (non-PAD) tokens; for a prompted language
model only over the input slot and what follows it (docs/methods.md#prompted-language-models).

The one feature path: every caller (calibration, recursive masking's observations, the perturbation kernel's
forwards in engine/faithfulness/perturb.py) pools which positions `masf_pooled_mask` says, with
`pool_hidden_states`."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from engine.models import Batch, Classifier, training_transform
from engine.models.kinds import ModelKind


@torch.no_grad()
def logits_and_features(classifier: Classifier, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward pass: the logits [B, C] (on the model's device) and the MaSF features [B, L+1, H] float64
    (cpu): embedding output and each layer's output, max over non-PAD positions.

    Recursive masking needs both at every step; taking them from one pass instead of two halves the forward
    rows of a step for `random` and saves a third for the single-backward measures (bench/masf.py measures it).
    The logits are those of `Classifier.logits` bit for bit: the same modules run on the same inputs, the hidden
    states are only kept."""
    out = classifier.forward(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                             token_type_ids=batch.token_type_ids, output_hidden_states=True)
    pooled = masf_pooled_mask(batch.attention_mask, pool_start(classifier, batch.maskable))
    return out.logits, pool_hidden_states(out.hidden_states, pooled).double().cpu()


def masf_pooled_mask(attention: torch.Tensor, start: torch.Tensor | None) -> torch.Tensor:
    """[B, T] bool: the positions whose hidden states MaSF max-pools, from attention [B, T] and `pool_start`'s
    start [B] (None: every real token). Every real token, except for a prompted causal LM: there the instruction
    before the input slot cannot attend to the input, so its hidden states are the same for every input and would
    dominate the maxima (measured: half of SmolLM2's pooled features were constant across inputs, and MaSF flagged
    nothing); only the slot's first token and what follows it count. (Not `Classifier.pooled_positions`: that is
    the one position per row whose final state the classification head reads.)"""
    real = attention.bool()
    if start is None:
        return real
    return real & from_start(start, real.shape[1])


def from_start(start: torch.Tensor, length: int) -> torch.Tensor:
    """[B, length] bool: True from each row's `start` [B] (`pool_start`) on: a prompted LM's cut."""
    return torch.arange(length, device=start.device)[None, :] >= start[:, None]


def pool_start(classifier: Classifier, maskable: torch.Tensor) -> torch.Tensor | None:
    """[B] the first position whose hidden state MaSF pools, from `maskable` [B, T]: for a prompted causal LM the
    first slot token (0 for a row without one), so every caller of the feature path (calibration, recursive
    masking, the perturbation kernel) pools the same positions; None for any other classifier (every real token)."""
    if classifier.kind is not ModelKind.PROMPTED:
        return None
    maskable = maskable.bool()
    first = maskable.float().argmax(1)  # index of the first maskable (slot) token
    return torch.where(maskable.any(1), first, torch.zeros_like(first))


def pool_hidden_states(states: Sequence[torch.Tensor], pooled: torch.Tensor) -> torch.Tensor:
    """The MaSF features [R, L+1, H]: each hidden state [R, T, H] max-pooled over the positions pooled [R, T]
    (`masf_pooled_mask`), layer by layer (no [R, L+1, T, H] stack), in the states' dtype and on their device.

    With right padding (each row's pooled positions first), rows of one length n are pooled over their first n
    positions by slicing, a run of equal lengths at a time: no [R, T, H] filled copy per layer, and the same maxima
    bit for bit (a max does not round). Callers sort their rows by length, so a pass has few runs; otherwise (or with
    padding elsewhere, or a row with nothing pooled) the positions not pooled are filled with -inf first."""
    R, T = pooled.shape
    real = pooled.bool()
    lengths = real.sum(1)
    runs, counts = torch.unique_consecutive(lengths, return_counts=True)
    right_padded = bool(torch.equal(real, torch.arange(T, device=pooled.device) < lengths[:, None]))
    if not right_padded or len(runs) > 32 or bool((lengths == 0).any()):
        pad = ~real[:, :, None]
        return torch.stack([h.masked_fill(pad, float("-inf")).amax(dim=1) for h in states], dim=1)
    out = torch.empty(R, len(states), states[0].shape[-1], dtype=states[0].dtype, device=states[0].device)
    start = 0
    for n, c in zip(runs.tolist(), counts.tolist()):
        for k, h in enumerate(states):
            torch.amax(h[start:start + c, :n], dim=1, out=out[start:start + c, k])
        start += c
    return out


def hidden_state_features(classifier: Classifier, batch: Batch) -> torch.Tensor:
    """[B, L+1, H] float64: embedding output and each layer's output, max over non-PAD positions."""
    return logits_and_features(classifier, batch)[1]


def calibration_features(classifier: Classifier, examples, strategy: str, seed: int = 1234, batch_size: int = 64,
                         progress=None) -> torch.Tensor:
    """Features [N, L+1, H] of `examples` transformed exactly like training with `strategy` (a masked
    model's calibration data contains masked inputs; a plain model's does not), with a fixed seed."""
    generator = torch.Generator().manual_seed(seed)
    order = np.argsort([len(e.primary) + len(e.auxiliary or "") for e in examples], kind="stable")
    feats = torch.empty(0)
    chunks = []
    for start in range(0, len(examples), batch_size):
        batch = classifier.batch_of([examples[i] for i in order[start : start + batch_size]])
        batch = training_transform(batch.to("cpu"), strategy, classifier.mask_token_id, generator).to(classifier.device)
        chunks.append(hidden_state_features(classifier, batch))
        if progress is not None:
            progress(min(start + batch_size, len(examples)), len(examples))
    feats = torch.cat(chunks)
    inverse = torch.empty(len(order), dtype=torch.long)
    inverse[torch.as_tensor(order)] = torch.arange(len(order))
    return feats[inverse]

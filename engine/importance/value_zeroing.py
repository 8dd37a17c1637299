"""Value zeroing (Mohebbi et al., EACL 2023) for encoder transformers: value-zeroing and value-zeroing-sign.

The paper measures context mixing: zero token j's value vector in one attention layer (every head), recompute that
layer, and score j by how far each other token's output representation moves (cosine distance); the per-layer maps
are then rolled out into a map of the whole model. The variant here is its whole-model readout for a classifier,
one number per token: token t's value vectors are zeroed in every layer's self-attention at once (the output of the
value projection at position t set to 0, all heads), the input is run through the model, and

    value-zeroing        1 - cos(h(x), h(x with v_t zeroed))   h: the final hidden state at the position the head
                         reads ([CLS]); the paper's dissimilarity, read where the classifier reads; unsigned, in [0, 2]
    value-zeroing-sign   f_c(x) - f_c(x with v_t zeroed)       the drop of the explained logit; signed, unit logit

Only the value path is cut: t's own representation (its query, its residual stream) is computed as usual, so a token
that no attention head reads from scores 0 whatever its own state. Zeroing is done by a forward hook on each layer's
value projection (BERT family: `attention.self.value`; DistilBERT: `attention.v_lin`); rows (one per maskable token,
and the input itself) go through the shared batched passes (`BatchedPasses._chunked_logits`).
"""
from __future__ import annotations

import torch

from engine.importance.batching import explained, rows_batch
from engine.importance.explainer import Explainer, PassEstimate
from engine.importance.registry import register
from engine.importance.types import Call

#: the names a value projection ends with, per encoder family
VALUE_PROJECTIONS = (".attention.self.value", ".attention.self.value_proj", ".attention.value", ".attention.v_lin")


def value_projections(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The value projection (an nn.Linear) of every self-attention layer of `model`, in layer order; [] for a model
    without them (a decoder LM, the BiLSTM)."""
    return [m for name, m in model.named_modules()
            if name.endswith(VALUE_PROJECTIONS) and isinstance(m, torch.nn.Linear)]


class _ValueZeroing(Explainer):
    cost_tier = 3
    readout = "cosine"

    def passes(self, n_tokens: int) -> PassEstimate:
        return PassEstimate(forward=n_tokens + 1)

    def supports(self) -> tuple[bool, str]:
        if getattr(self.classifier, "decoder", False) or not value_projections(self.classifier.model):
            return False, ("value zeroing needs an encoder transformer with a value projection in each self-attention "
                           "layer (BERT, RoBERTa, MiniLM, ELECTRA, ALBERT, DeBERTa-v2, DistilBERT); this model has none")
        return True, ""

    def _zeroed(self, call: Call) -> torch.Tensor:
        """[B, T] float64 per token: the readout's change when its value vectors are zeroed in every layer."""
        def compute():
            b = call.batch
            B, T = b.input_ids.shape
            row, pos = b.maskable.nonzero(as_tuple=True)
            rows = torch.cat([torch.arange(B, device=b.device), row])  # the inputs themselves, then one copy per token
            keep = torch.ones(len(rows), T, 1, device=b.device)
            keep[torch.arange(B, B + len(row), device=b.device), pos] = 0.0
            current: list[torch.Tensor] = []

            def zero(_module, _args, output):
                k = current[0][:, : output.shape[1]]
                return output * k.to(output.dtype)

            hooks = [m.register_forward_hook(zero) for m in value_projections(self.classifier.model)]

            def chunk(sl: slice, batch) -> torch.Tensor:
                r = rows[sl]
                current[:] = [keep[sl]]
                mini, ids = rows_batch(batch.input_ids[r], batch.attention_mask[r], batch.token_type_ids[r])
                out = self.classifier.forward(input_ids=ids, attention_mask=mini.attention_mask,
                                              token_type_ids=mini.token_type_ids,
                                              output_hidden_states=self.readout == "cosine")
                if self.readout == "cosine":
                    h = out.hidden_states[-1]
                    at = self.classifier.pooled_positions(mini.attention_mask)
                    return h[torch.arange(len(r), device=h.device), at]
                return explained(self.classifier, out.logits)

            try:
                values = self._chunked_logits(call, len(rows), T, chunk, b.device).to(torch.float64)
            finally:
                for h in hooks:
                    h.remove()
            base, zeroed = values[:B][row], values[B:]
            out = torch.zeros(B, T, dtype=torch.float64, device=b.device)
            if self.readout == "cosine":
                # clamped: identical states give 1 - cos = -2e-16 in rounding, and a distance is never below 0
                out[row, pos] = (1.0 - torch.nn.functional.cosine_similarity(base, zeroed, dim=-1)).clamp_min(0.0)
            else:
                picked = call.target[row][:, None]
                out[row, pos] = base.gather(1, picked).squeeze(1) - zeroed.gather(1, picked).squeeze(1)
            return out
        return self._shared(("value-zeroing", self.readout), compute, call)

    def _scores(self, call: Call):
        return self._zeroed(call), {}


@register
class ValueZeroing(_ValueZeroing):
    """value-zeroing: 1 - cos(h, h with token t's value vectors zeroed in every attention layer), h the final [CLS] state.

    Mohebbi et al. (2023)'s dissimilarity read at the representation the classifier's head reads (module docstring:
    the paper zeroes one layer at a time and rolls the maps out; here every layer at once). Encoders only.
    Unit: cosine distance in [0, 2]; unsigned."""

    name = "value-zeroing"
    signed = False
    readout = "cosine"


@register
class ValueZeroingSign(_ValueZeroing):
    """value-zeroing-sign: f_c(x) - f_c(x with token t's value vectors zeroed in every attention layer).

    The logit drop when no attention head can read token t (its own state is kept). Encoders only. Unit: logit;
    signed."""

    name = "value-zeroing-sign"
    signed = True
    readout = "logit"

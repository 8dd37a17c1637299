"""Leave-one-out with [MASK]: loo-sign and loo-abs.

    LOO_t = f_c(x) - f_c(x with token t replaced by [MASK])

in logits of the target class c. A masked fine-tuned model reads [MASK] as "information removed", so
the masked copy stays in distribution (FMM). Tokens that already are [MASK] score 0 (masking them again
changes nothing). All masked copies of all inputs go through as few forward passes as the memory
budget allows (on a CPU, passes of at least 4096 tokens, more for a small model, where throughput peaks:
`Explainer.rows_per_pass`), each chunk trimmed of trailing padding.
"""
from __future__ import annotations

import torch

from engine.importance.batching import explained
from engine.importance.explainer import Explainer, PassEstimate
from engine.importance.registry import register
from engine.importance.types import Call


class _LeaveOneOut(Explainer):
    uses_replacement = True  # replaces tokens by the mask (or chosen replacement) token
    def passes(self, n_tokens: int) -> PassEstimate:
        return PassEstimate(forward=n_tokens + 1)

    def _drops(self, call: Call) -> torch.Tensor:
        def compute():
            b = call.batch
            B, T = b.input_ids.shape
            mask_id = self.classifier.mask_token_id
            candidates = b.maskable & (b.input_ids != mask_id)
            row, pos = candidates.nonzero(as_tuple=True)
            copies = b.input_ids[row].clone()
            copies[torch.arange(len(row), device=b.device), pos] = mask_id
            own = call.logits is None or self.bf16  # f_c(x) rides along in the same forward (same precision)
            if own:
                ids = torch.cat([b.input_ids, copies])
                rows = torch.cat([torch.arange(B, device=b.device), row])
            else:
                ids, rows = copies, row
            logits = self.forward_logits(call, ids, rows)
            picked = logits.gather(1, call.target[rows][:, None]).squeeze(1).to(torch.float64)
            if own:
                f_x, f_masked = picked[:B], picked[B:]
            else:
                f_x, f_masked = explained(self.classifier, call.logits).gather(1, call.target[:, None]).squeeze(1).to(torch.float64), picked
            out = torch.zeros(B, T, dtype=torch.float64, device=b.device)
            out[row, pos] = f_x[row] - f_masked
            return out
        return self._shared(("loo",), compute, call)


@register
class LeaveOneOutSign(_LeaveOneOut):
    """loo-sign: f_c(x) - f_c(x with token t -> [MASK]), the drop of the target logit (signed).

    Positive: the token supports class c. Already-[MASK]ed tokens score 0. Unit: logit."""

    name = "loo-sign"
    cost_tier = 3
    signed = True

    def _scores(self, call: Call):
        return self._drops(call), {}


@register
class LeaveOneOutAbs(_LeaveOneOut):
    """loo-abs: |f_c(x) - f_c(x with token t -> [MASK])|. Unit: logit; unsigned."""

    name = "loo-abs"
    cost_tier = 3
    signed = False

    def _scores(self, call: Call):
        return self._drops(call).abs(), {}

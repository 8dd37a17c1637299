"""`beam`: the masking order found by beam search (Zhou & Shah 2023, as used in FMM).

Start from the unmasked input. At every step each beam (an ordered list of masked tokens) is extended by
masking one more maskable token; candidates that reach the same *set* of masked tokens are duplicates
(the model sees the same input) and only the best-scoring order of a set is kept. A beam's score is the
running sum, along its order, of f_c(unmasked) - f_c(input with the first j tokens masked) (logits of the
target class c); the top `beam_size` candidates survive. After N steps (N = maskable tokens not already
[MASK]) the best beam's order gives the importance: N for the first token masked, ..., 1 for the last.
Tokens that already are [MASK] are not searched and score 0.

Inherently recursive, so recursive masking computes it once on the unmasked input (`computed_once`).
Cost: about beam_size * N^2 / 2 forward rows per input (N = 60: ~18,000). All candidates of a step (of all
inputs) are evaluated once each, de-duplicated, in as few batched forwards as the memory budget allows.
Progress is streamed per step through `progress(done, total)` (done/total in search steps over the
batch), and `should_stop()` is polled before every forward chunk: returning True raises
`ExplanationCancelled`.
"""
from __future__ import annotations

import torch

from engine.errors import InvalidInputError
from engine.importance.batching import explained
from engine.importance.explainer import Explainer
from engine.importance.registry import register
from engine.importance.types import Call


@register
class BeamSearch(Explainer):
    """beam: importance = position in the beam-search masking order (N = masked first, ..., 1 = last).

    Option beam_size (B, default 10). Unit: rank. Signed as in docs/methods.md#importance-measures (the order follows the signed
    logit drop, so tokens that speak against c come last), though the ranks themselves are all >= 0.
    Costs ~B*N^2/2 forwards: streams progress, cancellable."""
    uses_replacement = True  # replaces tokens by the mask (or chosen replacement) token

    name = "beam"
    cost_tier = 5
    signed = True
    computed_once = True
    defaults = {"beam_size": 10}

    def _check_options(self) -> None:
        if self.options["beam_size"] < 1:
            raise InvalidInputError(f"beam_size must be at least 1, got {self.options['beam_size']}")

    def _scores(self, call: Call):
        b = call.batch
        B, T = b.input_ids.shape
        dev = b.device
        mask_id = self.classifier.mask_token_id
        width = self.options["beam_size"]
        if call.logits is None:
            with torch.no_grad():
                call.logits = self.input_logits(b)
        f_x = explained(self.classifier, call.logits).gather(1, call.target[:, None]).squeeze(1).double().tolist()
        candidates = b.maskable & (b.input_ids != mask_id)
        positions = [candidates[i].nonzero().flatten().tolist() for i in range(B)]
        n_steps = [len(p) for p in positions]
        total = sum(n_steps)
        # beams[i]: list of (score, order tuple, key bitmask); beam_ids[i]: [n_beams, T] ids with the order masked
        beams = [[(0.0, (), 0)] for _ in range(B)]
        beam_ids = [b.input_ids[i][None].clone() for i in range(B)]
        forwards = 0
        done = 0
        if call.progress is not None:
            call.progress(0, total)
        for step in range(max(n_steps, default=0)):
            call.check_stop()
            unique: dict[tuple[int, int], int] = {}  # (row, key) -> index into the forward rows
            parent_row, parent_beam, new_pos = [], [], []
            requests = []  # (row, beam index, position, unique index)
            for i in range(B):
                if step >= n_steps[i]:
                    continue
                for j, (_, _order, key) in enumerate(beams[i]):
                    for p in positions[i]:
                        if key >> p & 1:
                            continue
                        new_key = key | (1 << p)
                        u = unique.get((i, new_key))
                        if u is None:
                            u = unique[(i, new_key)] = len(parent_row)
                            parent_row.append(i)
                            parent_beam.append(j)
                            new_pos.append(p)
                        requests.append((i, j, p, u))
            if not unique:
                break
            ids = torch.cat([beam_ids[i][j][None] for i, j in zip(parent_row, parent_beam)])
            ids[torch.arange(len(new_pos), device=dev), torch.tensor(new_pos, device=dev)] = mask_id
            rows = torch.tensor(parent_row, device=dev)
            logits = self.forward_logits(call, ids, rows)
            forwards += len(parent_row)
            f_masked = logits.gather(1, call.target[rows][:, None]).squeeze(1).double().tolist()
            best: dict[tuple[int, int], tuple[float, tuple, int]] = {}  # (row, key) -> (score, order, u)
            for i, j, p, u in requests:
                score, order, key = beams[i][j]
                cand = (score + f_x[i] - f_masked[u], order + (p,), u)
                k = (i, key | (1 << p))
                if k not in best or cand[0] > best[k][0]:
                    best[k] = cand
            per_row: dict[int, list] = {}
            for (i, key), (score, order, u) in best.items():
                per_row.setdefault(i, []).append((score, order, key, u))
            for i, cands in per_row.items():
                cands.sort(key=lambda c: -c[0])  # stable: ties keep generation order
                kept = cands[:width]
                beams[i] = [(s, o, k) for s, o, k, _ in kept]
                beam_ids[i] = ids[[u for *_, u in kept]]
                done += 1
            if call.progress is not None:
                call.progress(done, total)
        # Ranks are written on the host and copied once: a write per token into a GPU tensor is a launch each.
        out = torch.zeros(B, T, dtype=torch.float64)
        best_score = []
        for i in range(B):
            score, order, _ = beams[i][0]
            best_score.append(score)
            n = len(order)
            if n:
                out[i, list(order)] = torch.arange(n, 0, -1, dtype=torch.float64)
        return out.to(dev), {"beam_score": torch.tensor(best_score, dtype=torch.float64), "forwards": forwards}

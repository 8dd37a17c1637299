"""Gradient measures: grad-l2, grad-l1 (norms of the gradient w.r.t. the one-hot input) and x-grad.

All four share one forward+backward pass per batch (memoised): g_t = d f_c / d e_t [B, T, H], the gradient
of the target logit w.r.t. the word embedding e_t = E[x_t] (position and type embeddings are added by the
model after this point, so they are not part of e_t).

With a one-hot input o_t (e_t = o_t E), the gradient w.r.t. o_t is g_t E^T [V]; its norms over the
vocabulary are grad-l2 and grad-l1, and its dot product with o_t is g_t . e_t (x-grad).
"""
from __future__ import annotations

import threading
import weakref

import torch

from engine.importance.explainer import Explainer, PassEstimate
from engine.importance.registry import register
from engine.importance.types import Call

_gram_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_gram_lock = threading.Lock()


def embedding_gram(classifier) -> torch.Tensor:
    """E^T E [H, H] in float64, computed once per model (again only if the embeddings change in place)."""
    E = classifier.embedding_matrix
    model = classifier.model
    stamp = (E.data_ptr(), E._version, tuple(E.shape), E.dtype)
    with _gram_lock:
        hit = _gram_cache.get(model)
        if hit is not None and hit[0] == stamp:
            return hit[1]
    with torch.no_grad():
        E64 = E.detach().to(torch.float64)
        gram = E64.T @ E64
    with _gram_lock:
        _gram_cache[model] = (stamp, gram)
    return gram


class _GradientFamily(Explainer):
    bf16_ok = True  # rankings within tolerance under bf16 autocast (bench/importance.py --bf16-agreement)

    def passes(self, n_tokens: int) -> PassEstimate:
        return PassEstimate(forward=1, backward=1)

    def _gradient(self, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        """(e [B, T, H], g [B, T, H]) for the call's batch and target (only g is memoised)."""
        e = self.classifier.word_embeddings(call.batch.input_ids).detach()

        def compute():
            rows = torch.arange(len(call.batch), device=e.device)
            g, _ = self.embedding_gradients(call, len(rows), lambda sl: e[sl], rows, call.target)
            return g
        return e, self._shared(("gradient",), compute, call)


@register
class GradL2(_GradientFamily):
    """grad-l2: ||g_t E^T||_2, the L2 norm over the vocabulary of the gradient w.r.t. the one-hot input.

    Computed as sqrt(g_t (E^T E) g_t^T) with E^T E [H, H] cached per model (float64), so the V-sized
    gradient is never formed. Unit: logit per unit of one-hot input; unsigned."""

    name = "grad-l2"
    cost_tier = 1
    signed = False

    def _scores(self, call: Call):
        _, g = self._gradient(call)
        gram = embedding_gram(self.classifier).to(g.device)
        g64 = g.to(torch.float64)
        quad = torch.einsum("bth,hk,btk->bt", g64, gram, g64)
        return quad.clamp_min(0).sqrt(), {}


@register
class GradL1(_GradientFamily):
    """grad-l1: ||g_t E^T||_1, the L1 norm over the vocabulary of the gradient w.r.t. the one-hot input.

    No shortcut exists for L1: |g_t E_v| is summed over the vocabulary in chunks of rows of E, for the
    maskable tokens only. Unit: logit per unit of one-hot input; unsigned.

    Cost: one [M, H] x [H, V] product on top of the shared gradient, V x H multiply-adds per maskable token
    (3.9 M for tiny's 30522 x 128 vocabulary, more than tiny's own forward+backward per token), run at the
    speed of a bare `g @ E.T`. That product, which grad-l2 and captum's Saliency (the gradient over H only)
    never form, is all of grad-l1's extra time over grad-l2 (measured: docs/methods.md#notes-behind-the-code)."""

    name = "grad-l1"
    cost_tier = 1
    signed = False
    chunk_elements = 1 << 23  # tokens x vocabulary entries per chunk (32 MiB of float32)

    def _scores(self, call: Call):
        _, g = self._gradient(call)
        mask = call.batch.maskable
        gm = g[mask]  # [M, H]
        E = self.classifier.embedding_matrix.detach()
        V = E.shape[0]
        total = torch.zeros(gm.shape[0], dtype=torch.float64, device=g.device)
        step = max(1, self.chunk_elements // max(1, gm.shape[0]))
        with torch.no_grad():
            for start in range(0, V, step):
                call.check_stop()
                total += (gm @ E[start:start + step].T.to(gm.dtype)).abs_().sum(1).to(torch.float64)
        out = torch.zeros(mask.shape, dtype=torch.float64, device=g.device)
        out[mask] = total
        return out, {}


@register
class XGradSign(_GradientFamily):
    """x-grad-sign: sum_h e_{t,h} g_{t,h}, input times gradient on the word embedding (signed).

    Equals the one-hot input times the gradient w.r.t. the one-hot input. Unit: logit (first-order
    Taylor estimate of the logit change when e_t is zeroed)."""

    name = "x-grad-sign"
    cost_tier = 1
    signed = True

    def _scores(self, call: Call):
        e, g = self._gradient(call)
        return (e.to(torch.float64) * g.to(torch.float64)).sum(-1), {}


@register
class XGradAbs(XGradSign):
    """x-grad-abs: |sum_h e_{t,h} g_{t,h}|, the absolute value of x-grad-sign. Unit: logit; unsigned."""

    name = "x-grad-abs"
    cost_tier = 1
    signed = False

    def _scores(self, call: Call):
        s, extras = super()._scores(call)
        return s.abs(), extras

"""SmoothGrad, SquareGrad and VarGrad: captum's `NoiseTunnel` over input x gradient on the word embeddings.

Each input's word embeddings e [L, H] get `n_samples` noisy copies e + eps, eps ~ N(0, sigma^2) elementwise, with
sigma = `noise` x (max(e) - min(e)) over that input's embeddings (Smilkov et al. 2017 recommend 10-20% of the input's
range); captum's `InputXGradient` gives a(e~) = e~ * d f_c / d e~ [L, H] for each copy, and `NoiseTunnel` aggregates:

    smoothgrad   mean_n a(e~_n)                 summed over H: signed, unit logit; noise 0 is x-grad-sign exactly
    squaregrad   mean_n a(e~_n)^2 (elementwise) summed over H: unsigned, unit logit^2
    vargrad      var_n a(e~_n)   (elementwise) summed over H: unsigned, unit logit^2; 0 without noise

The noise is drawn for the whole trimmed input (special tokens too, as captum adds it to the tensor it is given);
only the maskable tokens get scores. Draws are seeded per input (hash of `seed` and the token ids), so the scores are
reproducible and memoisable. Cost: n_samples forward+backward rows per input, `batch_samples` per pass.
"""
from __future__ import annotations

import torch

from engine.errors import InvalidInputError
from engine.importance.captum_extras import EmbeddingForward, seeded_rngs
from engine.importance.explainer import Explainer, PassEstimate
from engine.importance.random_baseline import row_seed
from engine.importance.registry import register
from engine.importance.types import Call


class _NoiseTunnel(Explainer):
    """Base of the three: `nt_type` is captum's aggregation ('smoothgrad', 'smoothgrad_sq', 'vargrad')."""

    nt_type = "smoothgrad"
    cost_tier = 2
    seeding = "option"
    defaults = {"n_samples": 20, "noise": 0.15, "seed": 0, "batch_samples": 20}

    def passes(self, n_tokens: int) -> PassEstimate:
        n = int(self.options["n_samples"])
        return PassEstimate(forward=n, backward=n)

    def _check_options(self):
        if self.options["n_samples"] < 1:
            raise InvalidInputError(f"n_samples must be at least 1, got {self.options['n_samples']}")
        if self.options["noise"] < 0:
            raise InvalidInputError(f"noise (the noise's standard deviation as a share of the input's embedding range) "
                                    f"must be >= 0, got {self.options['noise']}")
        if self.options["batch_samples"] < 1:
            raise InvalidInputError(f"batch_samples must be at least 1, got {self.options['batch_samples']}")

    def _scores(self, call: Call):
        from captum.attr import InputXGradient, NoiseTunnel

        b = call.batch
        B, T = b.input_ids.shape
        out = torch.zeros(B, T, dtype=torch.float64, device=b.device)
        forward = EmbeddingForward(self.classifier)
        tunnel = NoiseTunnel(InputXGradient(forward))
        lengths = b.attention_mask.sum(dim=1).tolist()
        for i in range(B):
            call.check_stop()
            L = int(lengths[i])
            ids = b.input_ids[i:i + 1, :L]
            e = self.classifier.word_embeddings(ids).detach()
            sigma = float(self.options["noise"]) * float(e.max() - e.min())
            att, types = b.attention_mask[i:i + 1, :L], b.token_type_ids[i:i + 1, :L]
            with seeded_rngs(row_seed(self.seed, ids), b.device), torch.enable_grad():
                attr = tunnel.attribute(e, nt_type=self.nt_type, nt_samples=int(self.options["n_samples"]),
                                        nt_samples_batch_size=int(self.options["batch_samples"]), stdevs=sigma,
                                        target=int(call.target[i]), additional_forward_args=(att, types))
            out[i, :L] = attr[0].detach().to(torch.float64).sum(-1)
            if call.progress is not None:
                call.progress(i + 1, B)
        return out, {}


@register
class SmoothGrad(_NoiseTunnel):
    """smoothgrad: mean over noisy copies of the word embeddings of input x gradient, summed over H (captum NoiseTunnel).

    Options: n_samples (noisy copies, default 20), noise (standard deviation as a share of the input's embedding
    range, default 0.15), seed, batch_samples (copies per pass). noise 0 gives x-grad-sign. Unit: logit; signed."""

    name = "smoothgrad"
    signed = True
    nt_type = "smoothgrad"


@register
class SquareGrad(_NoiseTunnel):
    """squaregrad: mean over noisy copies of the squared input x gradient, summed over H (captum NoiseTunnel).

    Options as smoothgrad. Unit: logit^2; unsigned."""

    name = "squaregrad"
    signed = False
    nt_type = "smoothgrad_sq"


@register
class VarGrad(_NoiseTunnel):
    """vargrad: variance over noisy copies of input x gradient, summed over H (captum NoiseTunnel).

    Options as smoothgrad; noise 0 gives 0 everywhere (no variance). Unit: logit^2; unsigned."""

    name = "vargrad"
    signed = False
    nt_type = "vargrad"

"""Measures computed by captum, with [MASK] as the baseline (in distribution thanks to masked fine-tuning).

Perturbation methods (kernel-shap, lime, shapley-sampling, occlusion) work on token ids: a removed token
becomes [MASK]. Each maskable token is one feature; all non-maskable positions (special tokens, the
auxiliary question) form one extra feature whose baseline is the token itself, so perturbing it changes
nothing and it never gets a score. Inputs are explained one at a time (captum's LIME/KernelSHAP fit one
surrogate per input), trimmed of padding, with perturbations batched `perturbations_per_eval` at a time.
Gradient methods (gradient-shap, deeplift) work on word embeddings with the [MASK] embedding as the
baseline on maskable positions (the input's own embedding elsewhere), and sum over the hidden dimension.

Sampling methods are seeded per input (hash of the measure seed and the token ids), so they are
reproducible and memoisable. captum's default LIME/KernelSHAP surrogates need scikit-learn, which this
project does not install: the surrogate here is a closed-form weighted ridge regression (`WeightedRidge`).
captum is imported only when one of these measures runs.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.importance.batching import explained
from engine.importance.completeness import (
    ABSOLUTE_TOLERANCE,
    GRADIENT_SHAP_STANDARD_ERRORS,
    allowed_gap,
    completeness_extras,
)
from engine.importance.explainer import Explainer
from engine.importance.random_baseline import row_seed
from engine.importance.registry import register
from engine.importance.types import Call


@contextmanager
def _seeded(seed: int, device: torch.device):
    """Seed torch's generators and NumPy's global one (captum's GradientShap draws its path points with
    `np.random`) for one captum call, and give the caller its random states back afterwards.

    The seed is a 63-bit int; NumPy's legacy seeding takes 32-bit words, so it gets both halves."""
    devices = [] if device.type == "cpu" else [device.index or 0]
    numpy_state = np.random.get_state()
    try:
        with torch.random.fork_rng(devices=devices, device_type=device.type if device.type != "cpu" else "cuda"):
            torch.manual_seed(seed)
            np.random.seed([seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF])
            yield
    finally:
        np.random.set_state(numpy_state)


class WeightedRidge:
    """A captum interpretable `Model`: weighted least squares with an intercept and an L2 penalty `alpha`
    on the coefficients (not the intercept), solved in closed form in float64 (alpha 0: minimum-norm
    least squares). Sample weights are used as given (as scikit-learn's `sample_weight`).

    The regression is small (n_samples x features) and is solved on the CPU whatever the data's device:
    CUDA has no 'gelsd' lstsq driver, and a CPU-only solve gives the same coefficients on every device.
    `coef` [outputs, M] and `intercept` [outputs] come back on the device and in the dtype of the inputs."""

    def __init__(self, alpha: float = 0.0):
        self.alpha = float(alpha)
        self.coef: torch.Tensor | None = None
        self.intercept: torch.Tensor | None = None

    def fit(self, train_data, **_):
        xs, ys, ws = [], [], []
        device = dtype = None
        for data in train_data:
            x, y = data[0], data[1]
            if device is None:
                device = x.device
                dtype = x.dtype if x.dtype.is_floating_point else torch.float32
            xs.append(x.detach().to("cpu", torch.float64))
            ys.append(y.detach().to("cpu", torch.float64).reshape(len(x), -1))
            ws.append(data[2].detach().to("cpu", torch.float64).reshape(-1) if len(data) > 2
                      else torch.ones(len(x), dtype=torch.float64))
        x, y, w = torch.cat(xs), torch.cat(ys), torch.cat(ws)
        mx = (w[:, None] * x).sum(0) / w.sum()
        my = (w[:, None] * y).sum(0) / w.sum()
        sw = w.sqrt()[:, None]
        xc, yc = (x - mx) * sw, (y - my) * sw  # raw weights: the penalty is not rescaled by their sum
        if self.alpha > 0:
            gram = xc.T @ xc + self.alpha * torch.eye(x.shape[1], dtype=torch.float64)
            coef = torch.linalg.solve(gram, xc.T @ yc)  # [M, outputs]
        else:
            coef = torch.linalg.lstsq(xc, yc, driver="gelsd").solution
        self.coef = coef.T.to(device, dtype)
        self.intercept = (my - mx @ coef).to(device, dtype)
        return {}

    def representation(self) -> torch.Tensor:
        return self.coef

    def __call__(self, x):
        return x.to(self.coef.dtype) @ self.coef.T + self.intercept


class _CaptumIds(Explainer):
    """Base of the perturbation methods: one captum call per input, on its token ids."""
    uses_replacement = True  # replaces tokens by the mask (or chosen replacement) token

    seeded = False

    def _method(self, forward):
        raise NotImplementedError

    def _kwargs(self, n_features: int) -> dict:
        return {}

    def _scores(self, call: Call):
        b = call.batch
        B, T = b.input_ids.shape
        out = torch.zeros(B, T, dtype=torch.float64, device=b.device)
        mask_id = self.classifier.mask_token_id
        for i in range(B):
            call.check_stop()
            L = int(b.attention_mask[i].sum())
            ids = b.input_ids[i:i + 1, :L]
            att, types = b.attention_mask[i:i + 1, :L], b.token_type_ids[i:i + 1, :L]
            maskable = b.maskable[i:i + 1, :L]
            n = int(maskable.sum())
            feature = torch.full_like(ids, n)
            feature[maskable] = torch.arange(n, device=ids.device)
            baseline = torch.where(maskable, torch.full_like(ids, mask_id), ids)

            def forward(x, att=att, types=types):
                with torch.no_grad():
                    return explained(self.classifier, self.classifier.forward(
                        input_ids=x, attention_mask=att.expand(len(x), -1), token_type_ids=types.expand(len(x), -1)).logits)

            attr = self._attribute_row(forward, ids, baseline, feature, int(call.target[i]), n)
            out[i, :L] = attr[0].to(torch.float64)
            if call.progress is not None:
                call.progress(i + 1, B)
        return out, {}

    def _attribute_row(self, forward, ids: torch.Tensor, baseline: torch.Tensor, feature: torch.Tensor, target: int,
                       n: int) -> torch.Tensor:
        """captum's attribution [1, L] of one input's ids [1, L]: `n` maskable tokens are features 0..n-1 in
        `feature` (the rest share feature n and stay as they are in `baseline`)."""
        method = self._method(forward)
        with _seeded(row_seed(self.options.get("seed", 0), ids), ids.device):
            return method.attribute(ids, baselines=baseline, target=target, feature_mask=feature, **self._kwargs(n + 1))


@register
class KernelShapImportance(_CaptumIds):
    """kernel-shap: KernelSHAP (captum) over tokens, removal = [MASK], weighted linear surrogate.

    Options: n_samples (coalitions per input, default 200), seed. Unit: logit; signed."""

    name = "kernel-shap"
    signed = True
    defaults = {"n_samples": 200, "seed": 0, "perturbations_per_eval": 64}

    def _method(self, forward):
        from captum.attr import KernelShap

        # KernelShap is Lime with the Shapley kernel; swap its sklearn surrogate for a closed-form one
        m = KernelShap(forward)
        m.interpretable_model = WeightedRidge(alpha=0.0)
        return m

    def _kwargs(self, n_features):
        return {"n_samples": self.options["n_samples"], "perturbations_per_eval": self.options["perturbations_per_eval"]}


@register
class LimeImportance(_CaptumIds):
    """lime: LIME (captum) over tokens, removal = [MASK], exponential cosine kernel, ridge surrogate.

    Options: n_samples (default 200), alpha (ridge penalty, default 1.0 as the original lime package),
    kernel_width (default 0.75), seed. Unit: logit; signed."""

    name = "lime"
    signed = True
    defaults = {"n_samples": 200, "alpha": 1.0, "kernel_width": 0.75, "seed": 0, "perturbations_per_eval": 64}

    def _method(self, forward):
        from captum.attr import Lime
        from captum.attr._core.lime import get_exp_kernel_similarity_function

        return Lime(forward, interpretable_model=WeightedRidge(alpha=self.options["alpha"]),
                    similarity_func=get_exp_kernel_similarity_function("cosine", self.options["kernel_width"]))

    def _kwargs(self, n_features):
        return {"n_samples": self.options["n_samples"], "perturbations_per_eval": self.options["perturbations_per_eval"]}


@register
class ShapleySamplingImportance(_CaptumIds):
    """shapley-sampling: Shapley value sampling (captum) over tokens, removal = [MASK].

    Options: n_samples (random permutations, default 10; cost n_samples x (N + 1) forwards), seed.
    Unit: logit; signed."""

    name = "shapley-sampling"
    signed = True
    defaults = {"n_samples": 10, "seed": 0, "perturbations_per_eval": 64}

    def _method(self, forward):
        from captum.attr import ShapleyValueSampling

        return ShapleyValueSampling(forward)

    def _kwargs(self, n_features):
        return {"n_samples": self.options["n_samples"], "perturbations_per_eval": self.options["perturbations_per_eval"]}


@register
class OcclusionImportance(_CaptumIds):
    """occlusion: captum Occlusion, windows of `window` consecutive tokens set to [MASK] (default 3).

    A token's score is the mean logit drop over the windows covering it (window 1 is loo-sign).
    Only maskable tokens are replaced inside a window. Unit: logit; signed."""

    name = "occlusion"
    signed = True
    defaults = {"window": 3, "perturbations_per_eval": 64}

    def _check_options(self):
        if self.options["window"] < 1:
            raise InvalidInputError(f"window must be at least 1 token, got {self.options['window']}")

    def _attribute_row(self, forward, ids, baseline, feature, target, n):
        from captum.attr import Occlusion

        # Windows slide over every position; a window replaces only the maskable tokens it covers (the
        # baseline keeps the others), so special tokens and the question are never occluded.
        w = min(self.options["window"], ids.shape[1])
        return Occlusion(forward).attribute(ids, sliding_window_shapes=(w,), strides=1, baselines=baseline, target=target,
                                            perturbations_per_eval=self.options["perturbations_per_eval"])


class _EmbeddingForward(torch.nn.Module):
    """logits from word embeddings, as an nn.Module (captum's DeepLift hooks the model's modules)."""

    def __init__(self, classifier):
        super().__init__()
        self.inner = classifier.model
        self._classifier = (classifier,)

    def forward(self, embeds, attention_mask, token_type_ids):
        return explained(self._classifier[0], self._classifier[0].forward(
            inputs_embeds=embeds, attention_mask=attention_mask, token_type_ids=token_type_ids).logits)


class _CaptumEmbeddings(Explainer):
    """Base of the gradient methods on word embeddings. Both have a completeness property (sum of the scores =
    f_c(x) - f_c(b): exactly for DeepLift's rescale rule, in expectation for GradientSHAP), checked per input by
    `_allowed` (engine.importance.completeness) and reported in `extras`; the scores are never changed by it."""
    uses_replacement = True  # replaces tokens by the mask (or chosen replacement) token
    signed = True

    def _attribute_row(self, forward, e, base, target, att, types) -> tuple[torch.Tensor, torch.Tensor]:
        """(attributions [1, L, H], captum's convergence deltas [n]: one per input, or per sample)."""
        raise NotImplementedError

    def _allowed(self, delta_f: float, deltas: torch.Tensor) -> float:
        return float(allowed_gap(torch.tensor([delta_f]))[0])

    def _scores(self, call: Call):
        b = call.batch
        B, T = b.input_ids.shape
        out = torch.zeros(B, T, dtype=torch.float64, device=b.device)
        gaps, f_x, f_b, allowed = (torch.zeros(B, dtype=torch.float64) for _ in range(4))
        mask_emb = self.classifier.word_embeddings(torch.tensor([[self.classifier.mask_token_id]], device=b.device))
        forward = _EmbeddingForward(self.classifier)
        for i in range(B):
            call.check_stop()
            L = int(b.attention_mask[i].sum())
            ids = b.input_ids[i:i + 1, :L]
            e = self.classifier.word_embeddings(ids).detach()
            base = torch.where(b.maskable[i:i + 1, :L, None], mask_emb.detach(), e)
            att, types = b.attention_mask[i:i + 1, :L], b.token_type_ids[i:i + 1, :L]
            with _seeded(row_seed(self.options.get("seed", 0), ids), b.device):
                attr, deltas = self._attribute_row(forward, e, base, int(call.target[i]), att, types)
            out[i, :L] = attr[0].detach().sum(-1).to(torch.float64)
            with torch.no_grad():
                ends = forward(torch.cat([e, base]), att.expand(2, -1), types.expand(2, -1))[:, int(call.target[i])]
            f_x[i], f_b[i] = float(ends[0]), float(ends[1])
            gaps[i] = float(out[i, :L][b.maskable[i, :L]].sum()) - (f_x[i] - f_b[i])
            allowed[i] = self._allowed(float(f_x[i] - f_b[i]), deltas.detach().to(torch.float64).cpu())
        extras = completeness_extras(gaps, f_x, f_b, allowed)
        return out, extras


@register
class GradientShapImportance(_CaptumEmbeddings):
    """gradient-shap: GradientSHAP (captum) on word embeddings, baseline the [MASK] embedding.

    With one baseline this is IG with random path points (expected gradients): n_samples draws of
    alpha ~ U(0, 1) (default 20) and Gaussian noise stdev (default 0), seeded per input by `seed` (captum draws
    the alphas from NumPy's global generator: it is seeded too, and restored after). Completeness holds in
    expectation: the gap is checked against 3 standard errors of the sample mean (engine.importance.completeness)
    and reported in extras. Unit: logit; signed."""

    name = "gradient-shap"
    defaults = {"n_samples": 20, "stdevs": 0.0, "seed": 0}

    def _attribute_row(self, forward, e, base, target, att, types):
        from captum.attr import GradientShap

        with torch.enable_grad():
            return GradientShap(forward).attribute(e, baselines=base, target=target, additional_forward_args=(att, types),
                                                   n_samples=self.options["n_samples"], stdevs=self.options["stdevs"],
                                                   return_convergence_delta=True)

    def _allowed(self, delta_f: float, deltas: torch.Tensor) -> float:
        # Completeness holds in expectation: the gap is the mean of the n per-sample gaps (captum's deltas), so it
        # is allowed GRADIENT_SHAP_STANDARD_ERRORS standard errors of that mean, or the absolute floor.
        n = len(deltas)
        se = float(deltas.std(unbiased=True)) / n ** 0.5 if n > 1 else float("inf")
        return max(GRADIENT_SHAP_STANDARD_ERRORS * se, ABSOLUTE_TOLERANCE)


@register
class DeepLiftImportance(_CaptumEmbeddings):
    """deeplift: DeepLift (captum) on word embeddings, baseline the [MASK] embedding (summed over H).

    Caveat: captum applies DeepLift's rescale rule only to nonlinearities that are nn.Module instances of
    the kinds it knows (in BERT: the pooler's Tanh); BERT's GELU (a custom module) and its attention
    softmax (a function call) fall back to plain gradients, so on transformers this is close to
    (e - b) * gradient, and its completeness (sum = f_c(x) - f_c(b)) can miss: the gap is checked (5% of
    |f_c(x) - f_c(b)|, 0.01 logits at least) and reported in extras. Unit: logit; signed."""

    name = "deeplift"
    defaults = {}

    def _attribute_row(self, forward, e, base, target, att, types):
        import warnings

        from captum.attr import DeepLift

        with torch.enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return DeepLift(forward).attribute(e, baselines=base, target=target, additional_forward_args=(att, types),
                                               return_convergence_delta=True)

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

from collections.abc import Callable
from contextlib import contextmanager, nullcontext

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.importance.batching import explained, rows_batch
from engine.importance.completeness import (
    ABSOLUTE_TOLERANCE,
    GRADIENT_SHAP_STANDARD_ERRORS,
    allowed_gap,
    completeness_extras,
)
from engine.importance.explainer import Explainer, PassEstimate
from engine.importance.random_baseline import row_seed
from engine.importance.registry import register
from engine.importance.types import Call


@contextmanager
def seeded_rngs(seed: int, device: torch.device):
    """Seed torch's generators and NumPy's global one (captum's GradientShap draws its path points with
    `np.random`) for one captum call, and give the caller its random states back afterwards.

    The seed is a 63-bit int; NumPy's legacy seeding takes 32-bit words, so it gets both halves. On a CPU only the
    CPU generator is seeded (the only one a CPU call draws from): `torch.manual_seed` also queues the seeding of
    every CUDA device, recording a stack trace each time when CUDA is not initialised, which cost DeepLift 10% of
    its time on a 64-token input."""
    devices = [] if device.type == "cpu" else [device.index or 0]
    numpy_state = np.random.get_state()
    try:
        with torch.random.fork_rng(devices=devices, device_type=device.type if device.type != "cpu" else "cuda"):
            if device.type == "cpu":
                torch.default_generator.manual_seed(seed)
            else:
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
        with seeded_rngs(row_seed(self.options.get("seed", 0), ids), ids.device):
            return method.attribute(ids, baselines=baseline, target=target, feature_mask=feature, **self._kwargs(n + 1))


class _CaptumSampled(_CaptumIds):
    """Base of the methods that sample coalitions or permutations of the tokens (KernelSHAP, LIME, Shapley value
    sampling): options n_samples and perturbations_per_eval (rows per forward batch), passed to captum as they are.
    `passes`: n_samples forwards plus the input's own (Shapley value sampling counts a forward per token added)."""

    def passes(self, n_tokens: int) -> PassEstimate:
        return PassEstimate(forward=int(self.options["n_samples"]) + 1)

    def _kwargs(self, n_features):
        return {"n_samples": self.options["n_samples"], "perturbations_per_eval": self.options["perturbations_per_eval"]}


@register
class KernelShapImportance(_CaptumSampled):
    """kernel-shap: KernelSHAP (captum) over tokens, removal = [MASK], weighted linear surrogate.

    Options: n_samples (coalitions per input, default 200), seed. Unit: logit; signed."""

    name = "kernel-shap"
    cost_tier = 4
    seeding = "option"
    signed = True
    defaults = {"n_samples": 200, "seed": 0, "perturbations_per_eval": 64}

    def _method(self, forward):
        from captum.attr import KernelShap

        # KernelShap is Lime with the Shapley kernel; swap its sklearn surrogate for a closed-form one
        m = KernelShap(forward)
        m.interpretable_model = WeightedRidge(alpha=0.0)
        return m


@register
class LimeImportance(_CaptumSampled):
    """lime: LIME (captum) over tokens, removal = [MASK], exponential cosine kernel, ridge surrogate.

    Options: n_samples (default 200), alpha (ridge penalty, default 1.0 as the original lime package),
    kernel_width (default 0.75), seed. Unit: logit; signed."""

    name = "lime"
    cost_tier = 4
    seeding = "option"
    signed = True
    defaults = {"n_samples": 200, "alpha": 1.0, "kernel_width": 0.75, "seed": 0, "perturbations_per_eval": 64}

    def _method(self, forward):
        from captum.attr import Lime
        from captum.attr._core.lime import get_exp_kernel_similarity_function

        return Lime(forward, interpretable_model=WeightedRidge(alpha=self.options["alpha"]),
                    similarity_func=get_exp_kernel_similarity_function("cosine", self.options["kernel_width"]))


@register
class ShapleySamplingImportance(_CaptumSampled):
    """shapley-sampling: Shapley value sampling (captum) over tokens, removal = [MASK].

    Options: n_samples (random permutations, default 10; cost n_samples x (N + 1) forwards), seed.
    Unit: logit; signed."""

    name = "shapley-sampling"
    cost_tier = 4
    seeding = "option"
    signed = True
    defaults = {"n_samples": 10, "seed": 0, "perturbations_per_eval": 64}

    def passes(self, n_tokens: int) -> PassEstimate:
        """n_samples permutations, each adding the tokens one at a time."""
        return PassEstimate(forward=int(self.options["n_samples"]) * n_tokens + 1)

    def _method(self, forward):
        from captum.attr import ShapleyValueSampling

        return ShapleyValueSampling(forward)


@register
class OcclusionImportance(_CaptumIds):
    """occlusion: captum Occlusion, windows of `window` consecutive tokens set to [MASK] (default 3).

    A token's score is the mean logit drop over the windows covering it (window 1 is loo-sign).
    Only maskable tokens are replaced inside a window. Unit: logit; signed."""

    name = "occlusion"
    cost_tier = 3
    signed = True
    defaults = {"window": 3, "perturbations_per_eval": 64}

    def passes(self, n_tokens: int) -> PassEstimate:
        """One row per window position (stride 1)."""
        return PassEstimate(forward=max(1, n_tokens - int(self.options["window"]) + 1) + 1)

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


class EmbeddingForward(torch.nn.Module):
    """logits from word embeddings, as an nn.Module (captum's DeepLift hooks the model's modules).

    While `on_call` is set, each call hands it (embeds, the explained logits): the passes captum makes already hold
    f_c(x) and f_c(b) (DeepLift) or the path points whose gradients give GradientSHAP's per-sample gaps, so the
    completeness check needs no pass of its own."""

    def __init__(self, classifier):
        super().__init__()
        self.inner = classifier.model
        self._classifier = (classifier,)
        self.on_call: Callable[[torch.Tensor, torch.Tensor], None] | None = None

    def forward(self, embeds, attention_mask, token_type_ids):
        # through logits_from_embeddings: a prompted LM serves its prompt's prefix from the key/value cache there
        rows, _ = rows_batch(None, attention_mask, token_type_ids, trim=False)
        out = explained(self._classifier[0], self._classifier[0].logits_from_embeddings(embeds, rows))
        if self.on_call is not None:
            self.on_call(embeds, out)
        return out


class _CaptumEmbeddings(Explainer):
    """Base of the gradient methods on word embeddings. Both have a completeness property (sum of the scores =
    f_c(x) - f_c(b): exactly for DeepLift's rescale rule, in expectation for GradientSHAP), checked per input by
    `_allowed` (engine.importance.completeness) and reported in `extras`; the scores are never changed by it.

    captum's own convergence delta is not asked for: it costs two more forward passes (DeepLift) or 2 x n_samples
    forward rows (GradientSHAP), while the check needs only f_c(x), f_c(b) and, for GradientSHAP, the per-sample
    gaps, which come from the passes captum makes anyway (`_attribute_row`)."""
    uses_replacement = True  # replaces tokens by the mask (or chosen replacement) token
    signed = True
    draws = True  # captum draws random numbers for it: each row runs seeded (`seeded_rngs`)

    def _attribute_row(self, forward: EmbeddingForward, e, base, target, att, types
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(attributions [1, L, H], (f_c(x), f_c(b)) [2], the completeness gaps [n] that captum's convergence
        deltas would be: one per input, or one per sample) for one input's embeddings e [1, L, H]."""
        raise NotImplementedError

    @staticmethod
    def _ends(forward: EmbeddingForward, e, base, target, att, types) -> torch.Tensor:
        """(f_c(x), f_c(b)) [2] float64, from one no-grad forward of the input and the baseline."""
        with torch.no_grad():
            return forward(torch.cat([e, base]), att.expand(2, -1), types.expand(2, -1))[:, target].to(torch.float64)

    def _allowed(self, delta_f: torch.Tensor, deltas: list[torch.Tensor]) -> torch.Tensor:
        """The largest |gap| [B] that counts as complete, for f_c(x) - f_c(b) = `delta_f` [B] float64 and each
        input's per-input or per-sample gaps `deltas` (B tensors [n]). Exact completeness: a share of delta_f."""
        return allowed_gap(delta_f)

    def _scores(self, call: Call):
        b = call.batch
        B, T = b.input_ids.shape
        out = torch.zeros(B, T, dtype=torch.float64, device=b.device)
        mask_emb = self.classifier.word_embeddings(torch.tensor([[self.classifier.mask_token_id]], device=b.device))
        forward = EmbeddingForward(self.classifier)  # per call: its on_call slot must not be shared by threads
        lengths = b.attention_mask.sum(dim=1).tolist()
        targets = call.target.tolist()
        ends_rows, delta_rows = [], []
        # Per row: tensors only (no float() per value, each a synchronisation and a Python object); the gaps and
        # the diagnostics are computed once for the batch after the loop.
        for i in range(B):
            call.check_stop()
            L = int(lengths[i])
            ids = b.input_ids[i:i + 1, :L]
            e = self.classifier.word_embeddings(ids).detach()
            base = torch.where(b.maskable[i:i + 1, :L, None], mask_emb.detach(), e)
            att, types = b.attention_mask[i:i + 1, :L], b.token_type_ids[i:i + 1, :L]
            target = int(targets[i])
            with seeded_rngs(row_seed(self.options.get("seed", 0), ids), b.device) if self.draws else nullcontext():
                attr, ends, deltas = self._attribute_row(forward, e, base, target, att, types)
            out[i, :L] = attr[0].detach().sum(-1).to(torch.float64)
            ends_rows.append(ends.detach())
            delta_rows.append(deltas)
        ends_all = torch.stack(ends_rows).to(torch.float64).cpu() if B else torch.zeros(0, 2, dtype=torch.float64)
        f_x, f_b = ends_all[:, 0], ends_all[:, 1]
        masked_sums = torch.where(b.maskable, out, torch.zeros((), dtype=torch.float64, device=out.device)).sum(1)
        gaps = masked_sums.cpu() - (f_x - f_b)
        extras = completeness_extras(gaps, f_x, f_b, self._allowed(f_x - f_b, delta_rows))
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
    cost_tier = 2
    seeding = "option"
    defaults = {"n_samples": 20, "stdevs": 0.0, "seed": 0}

    def passes(self, n_tokens: int) -> PassEstimate:
        n = int(self.options["n_samples"])
        return PassEstimate(forward=n, backward=n)

    def _attribute_row(self, forward, e, base, target, att, types):
        from captum.attr import GradientShap

        args = dict(baselines=base, target=target, additional_forward_args=(att, types),
                    n_samples=self.options["n_samples"], stdevs=self.options["stdevs"])
        if self.options["stdevs"] > 0:
            # Noisy inputs: a sample's gap needs f_c at its own noisy input, which no pass here computes: captum's
            # convergence delta (2 x n_samples more forward rows) is the only source.
            with torch.enable_grad():
                attr, deltas = GradientShap(forward).attribute(e, return_convergence_delta=True, **args)
            return attr, self._ends(forward, e, base, target, att, types), deltas
        # Without noise, sample i's gap is (e - b) . g_i - (f_c(x) - f_c(b)), g_i the gradient at its path point:
        # the gradients captum computes, caught on the path points' tensor as they are made.
        grads: list[torch.Tensor] = []

        def catch(embeds, _logits):
            embeds.register_hook(lambda g: grads.append(g.detach()))

        forward.on_call = catch
        try:
            with torch.enable_grad():
                attr = GradientShap(forward).attribute(e, **args)
        finally:
            forward.on_call = None
        g = torch.cat(grads)  # [n_samples, L, H]
        ends = self._ends(forward, e, base, target, att, types)  # 2 forward rows against n_samples forward+backward
        sums = ((e - base).detach().to(torch.float64) * g.to(torch.float64)).sum(dim=(1, 2))
        return attr, ends, sums - (ends[0] - ends[1])

    def _allowed(self, delta_f: torch.Tensor, deltas: list[torch.Tensor]) -> torch.Tensor:
        # Completeness holds in expectation: the gap is the mean of the n per-sample gaps (captum's deltas), so it
        # is allowed GRADIENT_SHAP_STANDARD_ERRORS standard errors of that mean, or the absolute floor.
        out = []
        for row in deltas:
            row = row.detach().to(torch.float64).cpu()
            n = len(row)
            se = float(row.std(unbiased=True)) / n ** 0.5 if n > 1 else float("inf")
            out.append(max(GRADIENT_SHAP_STANDARD_ERRORS * se, ABSOLUTE_TOLERANCE))
        return torch.tensor(out, dtype=torch.float64)


@register
class DeepLiftImportance(_CaptumEmbeddings):
    """deeplift: DeepLift (captum) on word embeddings, baseline the [MASK] embedding (summed over H).

    Caveat: captum applies DeepLift's rescale rule only to nonlinearities that are nn.Module instances of
    the kinds it knows (in BERT: the pooler's Tanh); BERT's GELU (a custom module) and its attention
    softmax (a function call) fall back to plain gradients, so on transformers this is close to
    (e - b) * gradient, and its completeness (sum = f_c(x) - f_c(b)) can miss: the gap is checked (5% of
    |f_c(x) - f_c(b)|, 0.01 logits at least) and reported in extras. Unit: logit; signed."""

    name = "deeplift"
    cost_tier = 1
    defaults = {}
    draws = False  # deterministic: no seeding (saving and restoring the random states) per row

    def passes(self, n_tokens: int) -> PassEstimate:
        """The input and its baseline, forward and backward together."""
        return PassEstimate(forward=2, backward=2)

    def _attribute_row(self, forward, e, base, target, att, types):
        import warnings

        from captum.attr import DeepLift

        # captum's DeepLift runs the input and the baseline as one batch of 2 rows: their logits are f_c(x), f_c(b)
        # (its hooks change only the backward), and the gap is the only per-input delta there is.
        seen: list[torch.Tensor] = []
        forward.on_call = lambda _embeds, logits: seen.append(logits.detach())
        try:
            with torch.enable_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                attr = DeepLift(forward).attribute(e, baselines=base, target=target, additional_forward_args=(att, types))
        finally:
            forward.on_call = None
        (logits,) = seen  # [2, C]: the input, then the baseline
        ends = logits[:, target].to(torch.float64)
        return attr, ends, (attr.detach().to(torch.float64).sum() - (ends[0] - ends[1])).reshape(1)

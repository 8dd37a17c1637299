"""Speed of the importance measures, as ratios.

For each checkpoint and input length T, every measure's wall time (median of repeats, one input, explicit
target so no prediction pass is counted) against
  (a) captum with its default settings on the same measure: IntegratedGradients (n_steps=50,
      Gauss-Legendre, all steps in one batch) vs our ig with 50 steps; FeatureAblation for loo
      (one token per feature, [MASK] baseline); Saliency for grad-l2/grad-l1; InputXGradient for x-grad;
      Occlusion, KernelShap, Lime, ShapleyValueSampling with captum's default perturbations_per_eval=1
      and our number of samples; GradientShap/DeepLift: captum's own call, which ours makes too, plus (ours)
      the completeness check (engine.importance.captum_extras: it reads the passes captum makes, and adds one
      2-row forward for GradientSHAP);
  (b) the forward-pass limit: the forward (and forward+backward) rows the measure needs divided by the
      peak batched throughput measured on this machine at the same T (best over batch sizes).
Every timing is alternated: ours, captum, the limit's peak passes, ours, captum, ... (`alternated`), and a ratio
is the median over rounds of the ratio within a round (`paired`), so that the load of a shared machine, which
drifts over minutes, cancels; the peak's batch size is chosen from the minimum of repeated timings (`Peak`).
Then recursive masking of 128 (grad-l2) and 32 (loo-sign) inputs against the limit of the rows it ran, and the
"live bundle" (the Explain page's measures, LIVE_MEASURES, target = prediction, results shared through the memo)
for one 64-token input.

    python bench/importance.py                          # tiny-rt-masked-s0 and minilm (fresh head)
    python bench/importance.py --threads 1 --cpu-time --repeats 7  # on a shared machine
    python bench/importance.py --base                   # only the live bundle on a random-weight BERT-base, T=128
    python bench/importance.py --smoke                  # CI: tiny with a fresh head, T=16, one repeat
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch  # noqa: E402
from _timing import live_bundle, sync  # noqa: E402

from engine.explain import LIVE_MEASURES  # noqa: E402
from engine.importance import get_explainer  # noqa: E402
from engine.importance.captum_extras import WeightedRidge  # noqa: E402
from engine.models import CheckpointError, load_classifier, tokenize  # noqa: E402
from engine.runtime import code_version, configure  # noqa: E402

TEXT = ("the film is a gripping , funny and often moving portrait of a family that never quite manages to say "
        "what it means , and the director , to his credit , lets the silences do the work ; the performances are "
        "uniformly strong , the photography is lovely , and if the last act drags a little and the score is too "
        "insistent , the whole thing still lands with real force . ") * 12

MEASURES = ["grad-l2", "grad-l1", "x-grad-sign", "ig-sign", "loo-sign", "attention-rollout", "occlusion",
            "kernel-shap", "lime", "shapley-sampling", "gradient-shap", "deeplift", "beam"]


# The clock every timing reads: wall time by default; with --cpu-time this process's CPU time, which other
# processes on a shared machine do not inflate (use it with --threads 1, where CPU time = compute time).
CLOCK = time.perf_counter


def alternated(fns: dict, repeats: int, budget_s: float, warm_up: bool = True) -> dict[str, list[float]]:
    """Times (on CLOCK) of each of `fns` (name -> callable), run in turn: one warm-up each, then rounds of
    fns[0](), fns[1](), ... `repeats` rounds (fewer when over `budget_s`; at least one). Round r's times were taken under
    about the same load, so a ratio of two of them is the machine's load cancelled: take the median of the
    per-round ratios (`paired`), not the ratio of two medians taken minutes apart."""
    for fn in fns.values() if warm_up else ():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    start = CLOCK()
    for r in range(repeats):
        if r and CLOCK() - start > budget_s:
            break
        for name, fn in fns.items():
            sync()
            t = CLOCK()
            fn()
            sync()  # a GPU call returns before its kernels finish: stop the clock on the work, not the launch
            times[name].append(CLOCK() - t)
    return times


def paired(over: list[float], under: list[float]) -> float:
    """The median over rounds of over[r] / under[r] (times from one `alternated` call)."""
    return statistics.median(a / b for a, b in zip(over, under))


def timed(fn, repeats: int, budget_s: float) -> float:
    """Median time of fn() over `repeats` runs after one warm-up (fewer when over `budget_s`)."""
    return statistics.median(alternated({"fn": fn}, repeats, budget_s)["fn"])


PEAK_BATCH_SIZES = (1, 4, 16, 32, 64, 128)
# --smoke: the peak from two batch sizes, timed once (the numbers mean nothing; CI runs every entry so)
SMOKE = False
SMOKE_BATCH_SIZES = (1, 4)


class Peak:
    """The peak batched throughput at T: the batch size whose pass of forward (or forward+backward w.r.t. the
    embeddings) rows is fastest per row, chosen from the minimum of repeated, interleaved timings of each size
    (a minimum, so that a burst of load during one size's turn does not move the choice). `pass_fn` is that
    best pass, for timing again beside each measure (`limit_times`)."""

    def __init__(self, classifier, T: int, backward: bool, repeats: int,
                 batch_sizes: tuple[int, ...] = PEAK_BATCH_SIZES):
        self.backward = backward
        batch_sizes = SMOKE_BATCH_SIZES if SMOKE else batch_sizes
        fns = {bs: self._pass(classifier, T, bs, backward) for bs in batch_sizes}
        times = alternated(fns, 1 if SMOKE else max(3, repeats), budget_s=30.0)
        best = {bs: min(ts) for bs, ts in times.items()}
        self.batch = max(best, key=lambda bs: bs / best[bs])
        self.rows_per_s = self.batch / best[self.batch]
        self.pass_fn = fns[self.batch]

    @staticmethod
    def _pass(classifier, T: int, bs: int, backward: bool):
        model = classifier.model
        ids = torch.randint(1000, 2000, (bs, T), device=classifier.device)
        am, tt = torch.ones_like(ids), torch.zeros_like(ids)
        if backward:
            e = classifier.word_embeddings(ids).detach()

            def fn():
                x = e.clone().requires_grad_(True)
                out = model(inputs_embeds=x, attention_mask=am, token_type_ids=tt).logits[:, 0].sum()
                torch.autograd.grad(out, x)
        else:
            def fn():
                with torch.no_grad():
                    model(input_ids=ids, attention_mask=am, token_type_ids=tt)
        return fn


class Limit:
    """The forward-pass limit of n_fwd forward and n_bwd forward+backward rows at T: the rows divided by the peak
    throughput. Its passes are timed in the same rounds as the measure (`fns`, then `per_round`), so that each
    round's ratio compares two timings under one load: a limit measured once, while the machine was busier than
    during the measure, gave ratios below 1."""

    def __init__(self, fwd: Peak, bwd: Peak, n_fwd: int, n_bwd: int):
        self.fwd, self.bwd, self.n_fwd, self.n_bwd = fwd, bwd, n_fwd, n_bwd

    def fns(self) -> dict:
        out = {}
        if self.n_fwd:
            out["peak fwd"] = self.fwd.pass_fn
        if self.n_bwd:
            out["peak fwd+bwd"] = self.bwd.pass_fn
        return out

    def per_round(self, times: dict[str, list[float]]) -> list[float]:
        """The limit (s) in each round of `alternated` times that included `fns()`."""
        rounds = len(next(iter(times.values())))
        out = [0.0] * rounds
        for key, peak, n in (("peak fwd", self.fwd, self.n_fwd), ("peak fwd+bwd", self.bwd, self.n_bwd)):
            if n:
                out = [o + n * t / peak.batch for o, t in zip(out, times[key])]
        return out

    def at_peak(self) -> float:
        """The limit (s) from the peaks' best timings."""
        return self.n_fwd / self.fwd.rows_per_s + self.n_bwd / self.bwd.rows_per_s


def passes(measure: str, N: int, L: int, options: dict, extras: dict) -> tuple[int, int]:
    """(forward rows, forward+backward rows) a measure needs for one input with N maskable of L tokens."""
    if measure in ("grad-l2", "grad-l1", "x-grad-sign", "x-grad-abs"):
        return 0, 1
    if measure in ("ig-sign", "ig-abs"):
        return 2, options.get("steps", 20)
    if measure in ("loo-sign", "loo-abs"):
        return N + 1, 0
    if measure.startswith("attention"):
        return 1, 0
    if measure == "occlusion":
        return L - options.get("window", 3) + 2, 0
    if measure in ("kernel-shap", "lime"):
        return options["n_samples"], 0
    if measure == "shapley-sampling":
        return options["n_samples"] * (N + 2) + 1, 0
    if measure == "gradient-shap":
        return 2, options["n_samples"]  # the path points, and f(x), f(b) for the completeness check
    if measure == "deeplift":
        return 0, 2
    if measure == "beam":
        return extras.get("forwards", 0) + 1, 0
    return 0, 0


# What measures share through the memo on one input (the live bundle): the gradient, IG's path, the LOO copies,
# the attention forward.
SHARED = {"grad-l2": "gradient", "grad-l1": "gradient", "x-grad-sign": "gradient", "x-grad-abs": "gradient",
          "ig-sign": "ig", "ig-abs": "ig", "loo-sign": "loo", "loo-abs": "loo", "attention-cls-last": "attention",
          "attention-mean": "attention", "attention-rollout": "attention"}


def bundle_rows(measures, N: int, L: int) -> tuple[int, int]:
    """(forward rows, forward+backward rows) the measures need together on one input of N maskable of L tokens, the
    target being the prediction: one prediction forward, and what they share (SHARED) counted once; LOO's f(x) is
    the prediction's."""
    n_fwd, n_bwd, seen = 1, 0, set()
    for measure in measures:
        key = SHARED.get(measure, measure)
        if key in seen:
            continue
        seen.add(key)
        f, b = passes(measure, N, L, _defaults(measure), {})
        n_fwd += f - (1 if key == "loo" else 0)
        n_bwd += b
    return n_fwd, n_bwd


def _defaults(measure: str) -> dict:
    from engine.importance import MEASURES as ALL

    return dict(ALL[measure].defaults)


class EmbForward(torch.nn.Module):
    """The classifier as a function of word embeddings [B, T, H] (and attention/type ids): captum's input."""

    def __init__(self, model):
        super().__init__()
        self.inner = model

    def forward(self, x, a, t):
        return self.inner(inputs_embeds=x, attention_mask=a, token_type_ids=t).logits


def captum_reference(measure: str, classifier, batch, target: int, ours_options: dict):
    """A callable running captum's default-settings counterpart of `measure`, or None."""
    from captum.attr import (
        DeepLift,
        FeatureAblation,
        GradientShap,
        InputXGradient,
        IntegratedGradients,
        KernelShap,
        Lime,
        Occlusion,
        Saliency,
        ShapleyValueSampling,
    )

    model = classifier.model
    am, tt = batch.attention_mask, batch.token_type_ids
    ids = batch.input_ids
    L = ids.shape[1]
    mask_id = classifier.mask_token_id
    baseline_ids = torch.where(batch.maskable, torch.full_like(ids, mask_id), ids)
    feature = torch.full_like(ids, int(batch.maskable.sum()))
    feature[batch.maskable] = torch.arange(int(batch.maskable.sum()), device=ids.device)

    def f_ids(x):
        with torch.no_grad():
            return model(input_ids=x, attention_mask=am.expand(len(x), -1), token_type_ids=tt.expand(len(x), -1)).logits

    f_emb = EmbForward(model)
    e = classifier.word_embeddings(ids).detach()
    mask_emb = classifier.word_embeddings(torch.full_like(ids, mask_id)).detach()
    base_emb = torch.where(batch.maskable[..., None], mask_emb, e)
    zero_base = torch.where(batch.maskable[..., None], torch.zeros_like(e), e)
    args = (am, tt)
    if measure in ("grad-l2", "grad-l1"):
        return lambda: Saliency(f_emb).attribute(e, target=target, additional_forward_args=args)
    if measure.startswith("x-grad"):
        return lambda: InputXGradient(f_emb).attribute(e, target=target, additional_forward_args=args)
    if measure.startswith("ig"):
        return lambda: IntegratedGradients(f_emb).attribute(e, baselines=zero_base, target=target,
                                                            additional_forward_args=args)
    if measure.startswith("loo"):
        return lambda: FeatureAblation(f_ids).attribute(ids, baselines=baseline_ids, target=target,
                                                        feature_mask=torch.arange(L)[None])
    if measure == "occlusion":
        return lambda: Occlusion(f_ids).attribute(ids, sliding_window_shapes=(ours_options["window"],),
                                                  baselines=baseline_ids, target=target)
    if measure == "kernel-shap":
        def ks():
            m = KernelShap(f_ids)
            m.interpretable_model = WeightedRidge()  # captum's default surrogate needs scikit-learn
            return m.attribute(ids, baselines=baseline_ids, target=target, feature_mask=feature,
                               n_samples=ours_options["n_samples"])
        return ks
    if measure == "lime":
        return lambda: Lime(f_ids, interpretable_model=WeightedRidge(1.0)).attribute(
            ids, baselines=baseline_ids, target=target, feature_mask=feature, n_samples=ours_options["n_samples"])
    if measure == "shapley-sampling":
        return lambda: ShapleyValueSampling(f_ids).attribute(ids, baselines=baseline_ids, target=target,
                                                             feature_mask=feature, n_samples=ours_options["n_samples"])
    if measure == "gradient-shap":
        return lambda: GradientShap(f_emb).attribute(e, baselines=base_emb, target=target, additional_forward_args=args,
                                                     n_samples=ours_options["n_samples"])
    if measure == "deeplift":
        import warnings

        def dl():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return DeepLift(f_emb).attribute(e, baselines=base_emb, target=target, additional_forward_args=args)
        return dl
    return None


_MODELS: dict = {}


def get_model(model_id: str):
    """A checkpoint from models_cache, or, for a packaged encoder name ('tiny', 'minilm'), that encoder with
    a fresh classification head: timings do not depend on the trained weights, so the bench runs without
    first spending minutes to fine-tune."""
    if model_id not in _MODELS:
        try:
            _MODELS[model_id] = load_classifier(model_id)
        except CheckpointError:
            from engine.data import get_dataset
            from engine.models import PACKAGED_ENCODERS, TrainConfig
            from engine.models.training import untrained_classifier

            if model_id not in PACKAGED_ENCODERS:
                raise
            from engine.runtime import pick_device

            classifier = untrained_classifier(TrainConfig(base_model=model_id, dataset="rt"), get_dataset("rt"), pick_device())
            classifier.model.eval()
            classifier.metadata = {"id": f"{model_id} (fresh head)", "dataset": "rt"}
            _MODELS[model_id] = classifier
    return _MODELS[model_id]


def bench_model(model_id: str, lengths, repeats: int, beam_lengths, skip_captum: set, measures,
                bf16: bool = False) -> list[str]:
    """bf16: also time bfloat16 autocast (only worth it on CPUs with AVX512-BF16/AMX, or CUDA).

    Each measure is timed alternated with its captum counterpart and with the peak passes of its limit (ours,
    captum, peak forward, peak forward+backward, ours, ...): the ratios are medians of per-round ratios."""
    classifier = get_model(model_id)
    rows = []
    for T in lengths:
        batch = tokenize(classifier.tokenizer, TEXT, max_length=T).to(classifier.device)
        assert batch.input_ids.shape[1] == T
        N, L = int(batch.maskable.sum()), T
        with torch.no_grad():
            target = int(classifier.logits(batch).argmax())
        fwd, bwd = Peak(classifier, T, False, repeats), Peak(classifier, T, True, repeats)
        rows.append(f"| {model_id} | {T} | *peak throughput* | fwd {fwd.rows_per_s:.0f} rows/s (batch {fwd.batch}); "
                    f"fwd+bwd {bwd.rows_per_s:.0f} rows/s (batch {bwd.batch}) | | | | | | |")
        print(rows[-1], flush=True)
        for measure in measures:
            if measure == "beam" and T not in beam_lengths:
                est = 10 * N * N / 2 / fwd.rows_per_s
                rows.append(f"| {model_id} | {T} | beam | not run (~{10 * N * N // 2} forward rows, >= {est:.0f} s at peak) | | | | | | |")
                continue
            options = {"steps": 50} if measure.startswith("ig") else {}
            explainer = get_explainer(measure, classifier, memo=False, **options)
            ok, _ = explainer.supports()
            if not ok:
                continue
            budget = 60.0 if measure == "beam" else 30.0
            result = {}

            def ours():
                result["imp"] = explainer.attribute(batch, target)
            ours()  # the warm-up, and the extras that say what beam spent
            n_fwd, n_bwd = passes(measure, N, L, explainer.options, result["imp"].extras)
            limit = Limit(fwd, bwd, n_fwd, n_bwd)
            fns = {"ours": ours}
            ref = None if measure in skip_captum else captum_reference(measure, classifier, batch, target, explainer.options)
            if ref:
                fns["captum"] = ref
            if explainer.bf16_ok and bf16:
                fast = get_explainer(measure, classifier, memo=False, bf16=True, **options)
                fns["bf16"] = lambda: fast.attribute(batch, target)
            fns.update(limit.fns())
            times = alternated(fns, 1 if measure == "beam" else repeats, budget, warm_up=measure != "beam")
            limits = limit.per_round(times) if limit.fns() else None
            t_ours = statistics.median(times["ours"])
            ratio_ref = f"{paired(times['ours'], times['captum']):.2f}x" if ref else "—"
            if "bf16" in times and ref:
                ratio_ref += f" (bf16 {paired(times['bf16'], times['captum']):.2f}x)"
            bf16_ms = f"{statistics.median(times['bf16']) * 1e3:.1f}" if "bf16" in times else "—"
            ref_ms = f"{statistics.median(times['captum']) * 1e3:.1f}" if ref else "—"
            lim_ms = f"{statistics.median(limits) * 1e3:.1f}" if limits else "—"
            lim_ratio = f"{paired(times['ours'], limits):.2f}x" if limits else "—"
            label = f"{measure} (50 steps, as captum)" if measure.startswith("ig") else measure
            rows.append(f"| {model_id} | {T} | {label} | {t_ours * 1e3:.1f} | {bf16_ms} | {ref_ms} | {ratio_ref} | "
                        f"{n_fwd} + {n_bwd} | {lim_ms} | {lim_ratio} |")
            print(rows[-1], flush=True)
            if measure.startswith("ig") and ref:
                rows.append(ig_default_row(model_id, T, classifier, batch, target, repeats, ref, fwd, bwd))
                print(rows[-1], flush=True)
    return rows


def ig_default_row(model_id, T, classifier, batch, target, repeats, ref, fwd: Peak, bwd: Peak) -> str:
    """Our IG at its defaults (20 midpoint steps, docs/methods.md#importance-measures) against captum at its defaults (50
    Gauss-Legendre steps, `ref`), alternated, with each one's completeness error |sum IG - (f(x) - f(b))| /
    |f(x) - f(b)| so that the speed-up is not bought with accuracy."""
    from captum.attr import IntegratedGradients

    ours = get_explainer("ig-sign", classifier, memo=False)
    limit = Limit(fwd, bwd, 2, ours.options["steps"])
    times = alternated({"ours": lambda: ours.attribute(batch, target), "captum": ref, **limit.fns()}, repeats, 30.0)
    t, t_ref = statistics.median(times["ours"]), statistics.median(times["captum"])
    limits = limit.per_round(times)
    gap_ours = float(ours.attribute(batch, target).extras["relative_gap"][0])
    model = classifier.model

    e = classifier.word_embeddings(batch.input_ids).detach()
    zero_base = torch.where(batch.maskable[..., None], torch.zeros_like(e), e)
    _, delta = IntegratedGradients(EmbForward(model)).attribute(
        e, baselines=zero_base, target=target, additional_forward_args=(batch.attention_mask, batch.token_type_ids),
        return_convergence_delta=True)
    with torch.no_grad():
        f = EmbForward(model)
        span = float(f(e, batch.attention_mask, batch.token_type_ids)[0, target]
                     - f(zero_base, batch.attention_mask, batch.token_type_ids)[0, target])
    gap_captum = abs(float(delta[0])) / max(abs(span), 1e-12)
    return (f"| {model_id} | {T} | ig-sign at defaults: ours {ours.options['steps']} midpoint steps (completeness error "
            f"{gap_ours:.1e}) vs captum 50 Gauss-Legendre ({gap_captum:.1e}) | {t * 1e3:.1f} | — | {t_ref * 1e3:.1f} | "
            f"{paired(times['ours'], times['captum']):.2f}x | 2 + {ours.options['steps']} | "
            f"{statistics.median(limits) * 1e3:.1f} | {paired(times['ours'], limits):.2f}x |")


def bench_batched(model_id: str, repeats: int, B: int = 16, T: int = 64) -> list[str]:
    """Single-pass measures on B inputs at once (as in recursive masking of a dataset): one input alone is
    latency-bound and cannot reach the peak throughput the limit assumes; a batch can."""
    classifier = get_model(model_id)
    batch = tokenize(classifier.tokenizer, [TEXT[i * 7:] for i in range(B)], max_length=T).to(classifier.device)
    target = torch.zeros(B, dtype=torch.long)
    fwd, bwd = Peak(classifier, T, False, repeats), Peak(classifier, T, True, repeats)
    rows = []
    for measure, n_fwd, n_bwd in (("grad-l2", 0, B), ("x-grad-sign", 0, B), ("attention-rollout", B, 0)):
        explainer = get_explainer(measure, classifier, memo=False)
        limit = Limit(fwd, bwd, n_fwd, n_bwd)
        times = alternated({"ours": lambda: explainer.attribute(batch, target), **limit.fns()}, repeats, 30.0)
        limits = limit.per_round(times)
        rows.append(f"| {model_id} | {T} | {measure}, {B} inputs at once | {statistics.median(times['ours']) * 1e3:.1f} | "
                    f"{statistics.median(limits) * 1e3:.1f} | {paired(times['ours'], limits):.2f}x |")
        print(rows[-1], flush=True)
    return rows


def bf16_agreement(model_id: str, n: int = 40) -> list[str]:
    """Rank agreement of bf16-autocast scores with float32 on n test inputs (gold target)."""
    import numpy as np
    from scipy.stats import spearmanr

    from engine.data import get_dataset
    from engine.importance import MEASURES as ALL

    classifier = load_classifier(model_id)
    dataset = get_dataset(classifier.metadata["dataset"], classifier.metadata.get("split_seed", 0))
    batch = classifier.batch_of(dataset.split("test")[:n])
    rows = []
    for measure in ["grad-l2", "grad-l1", "x-grad-sign", "x-grad-abs", "ig-sign", "ig-abs", "loo-sign", "loo-abs",
                    "attention-cls-last", "attention-mean", "attention-rollout"]:
        cls = ALL[measure]
        allowed = cls.bf16_ok
        cls.bf16_ok = True  # measure it even where it is refused
        try:
            a = get_explainer(measure, classifier, memo=False).attribute(batch, batch.target)
            z = get_explainer(measure, classifier, memo=False, bf16=True).attribute(batch, batch.target)
        finally:
            cls.bf16_ok = allowed
        rhos, tops = [], []
        for i in range(len(batch)):
            x, y = a.token_scores(i).numpy(), z.token_scores(i).numpy()
            if len(x) < 3:
                continue
            rhos.append(spearmanr(x, y).statistic)
            k = max(1, round(0.1 * len(x)))
            tops.append(len(set(np.argsort(-x)[:k]) & set(np.argsort(-y)[:k])) / k)
        ok = np.median(rhos) >= 0.99 and np.percentile(rhos, 5) >= 0.98 and np.mean(tops) >= 0.95
        rows.append(f"| {model_id} | {measure} | {np.median(rhos):.3f} | {np.percentile(rhos, 5):.3f} | {np.mean(tops):.3f} | "
                    f"{'within' if ok else 'outside'} | {'yes' if allowed else 'no'} |")
        print(rows[-1], flush=True)
    return rows


def base_sized_model() -> str:
    """A random-weight BERT-base sequence classifier (12 layers, hidden 768, 12 heads, 110M parameters), written
    with save_pretrained beside the packaged BERT tokenizer and loaded like a user's own folder (the timings do
    not depend on the weights). Returns its id in the model table."""
    import tempfile

    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from engine.models import resolve_encoder

    model_id = "bert-base (random weights)"
    if model_id not in _MODELS:
        folder = tempfile.mkdtemp(prefix="bert-base-random.")
        torch.manual_seed(0)
        BertForSequenceClassification(BertConfig(vocab_size=30522, num_labels=2)).save_pretrained(folder)
        AutoTokenizer.from_pretrained(resolve_encoder("tiny")).save_pretrained(folder)
        _MODELS[model_id] = load_classifier(folder)
    return model_id


def bench_recursive(model_id: str, repeats: int, n_inputs: dict[str, int], words: int = 45,
                    ratios: tuple[float, ...] | None = None) -> list[str]:
    """Recursive masking of a dataset (`dataset_masking_curve`, 11 steps) with single-pass grad-l2 and with loo-sign,
    against the forward-pass limit of the rows it ran (counted with a hook on the model: forward rows, and
    forward+backward rows, each at the padded length T of the inputs, which all have `words` words), alternated
    with the same run as before the rows-per-pass fix (batches of 32 inputs, passes of 4096 tokens) and with the
    peak passes. n_inputs: measure -> inputs."""
    from engine.data import Dataset, Example
    from engine.faithfulness.recursive import dataset_masking_curve
    from engine.importance import batching

    classifier = get_model(model_id)
    words_of = TEXT.split()
    rows = []
    for measure, n in n_inputs.items():
        examples = [Example(primary=" ".join(words_of[i:i + words]), label=0, uid=str(i)) for i in range(n)]
        dataset = Dataset(name="bench", classes=tuple(classifier.classes), metric="accuracy", split_seed=0,
                          splits={"train": [], "validation": [], "test": examples})
        T = int(classifier.batch_of(examples).input_ids.shape[1])
        explainer = get_explainer(measure, classifier, memo=False)
        counted: list[tuple[int, bool]] = []
        hook = classifier.model.register_forward_hook(
            lambda _m, args, kwargs, _out: counted.append((int(next(
                x for x in (kwargs.get("inputs_embeds"), kwargs.get("input_ids"), *args) if x is not None).shape[0]),
                torch.is_grad_enabled())), with_kwargs=True)

        def now():
            return dataset_masking_curve(classifier, explainer, dataset, ratios=ratios)

        def before():
            saved = batching.CPU_FORWARD_ACTIVATION_MB
            batching.CPU_FORWARD_ACTIVATION_MB = 0
            try:
                return dataset_masking_curve(classifier, explainer, dataset, ratios=ratios, batch_size=32)
            finally:
                batching.CPU_FORWARD_ACTIVATION_MB = saved
        try:
            counted.clear()
            now()
            n_fwd = sum(r for r, grad in counted if not grad)
            n_bwd = sum(r for r, grad in counted if grad)
            widest = max(r for r, _ in counted)
            counted.clear()
            before()
            widest_before = max(r for r, _ in counted)
        finally:
            hook.remove()
        fwd, bwd = Peak(classifier, T, False, repeats), Peak(classifier, T, True, repeats)
        limit = Limit(fwd, bwd, n_fwd, n_bwd)
        times = alternated({"now": now, "before": before, **limit.fns()}, repeats, 240.0, warm_up=False)
        limits = limit.per_round(times)
        rows.append(f"| {model_id} | {T} | recursive masking, {measure}, {n} inputs | {n_fwd} + {n_bwd} | "
                    f"{statistics.median(limits):.2f} s | {statistics.median(times['now']):.2f} s (widest pass {widest} "
                    f"rows) | {paired(times['now'], limits):.2f}x | {statistics.median(times['before']):.2f} s (widest "
                    f"{widest_before}) | {paired(times['before'], limits):.2f}x | fwd {fwd.rows_per_s:.0f} rows/s "
                    f"(batch {fwd.batch}), fwd+bwd {bwd.rows_per_s:.0f} (batch {bwd.batch}) |")
        print(rows[-1], flush=True)
    return rows


def bench_live_bundle(model_id: str, repeats: int, T: int = 64, batch_sizes: tuple[int, ...] = PEAK_BATCH_SIZES) -> list[str]:
    """The Explain page's measures (LIVE_MEASURES, target = prediction) on one T-token input, sharing one memo,
    against the same measures one by one and against the forward-pass limit of the rows they need together
    (`bundle_rows`), all three alternated."""
    classifier = get_model(model_id)
    batch = tokenize(classifier.tokenizer, TEXT, max_length=T).to(classifier.device)
    _, bundle, separately = live_bundle(classifier, batch)

    fwd = Peak(classifier, T, False, repeats, batch_sizes)
    bwd = Peak(classifier, T, True, repeats, batch_sizes)
    print(f"peak throughput at T={T}: forward {fwd.rows_per_s:.1f} rows/s (batch {fwd.batch}), forward+backward "
          f"{bwd.rows_per_s:.1f} rows/s (batch {bwd.batch}); batch sizes tried {batch_sizes}", flush=True)
    N = int(batch.maskable.sum())
    n_fwd, n_bwd = bundle_rows(LIVE_MEASURES, N, T)
    limit = Limit(fwd, bwd, n_fwd, n_bwd)
    times = alternated({"bundle": bundle, "separately": separately, **limit.fns()}, repeats, 60.0)
    limits = limit.per_round(times)
    return [f"| {model_id} | live bundle, T={T} ({len(LIVE_MEASURES)} measures: {', '.join(LIVE_MEASURES)}) | "
            f"{statistics.median(times['bundle']) * 1e3:.0f} ms shared | {statistics.median(times['separately']) * 1e3:.0f} ms "
            f"one by one | limit {statistics.median(limits) * 1e3:.0f} ms ({n_fwd} fwd + {n_bwd} fwd+bwd rows) | "
            f"{paired(times['bundle'], limits):.2f}x |"]


def cpu_description() -> str:
    """The CPU's model name and the vector extensions the timings depend on (AVX2, AVX512, AVX512-BF16, AMX), as
    /proc/cpuinfo lists them; the platform's name elsewhere."""
    try:
        info = open("/proc/cpuinfo").read()
    except OSError:
        return platform.processor() or platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                platform.machine())
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    have = [label for flag, label in (("avx2", "AVX2"), ("avx512f", "AVX512"), ("avx512_bf16", "AVX512-BF16"),
                                      ("amx_bf16", "AMX-BF16")) if flag in flags]
    missing = [f"no {label}" for label in ("AVX512", "AVX512-BF16") if label not in have]
    return f"{name} ({', '.join(have + missing)})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["tiny-rt-masked-s0", "minilm"],
                   help="checkpoint ids, or a packaged encoder name (tiny, minilm) for that encoder with a fresh head")
    p.add_argument("--lengths", nargs="+", type=int, default=[64, 256])
    p.add_argument("--beam-lengths", nargs="*", type=int, default=[64], help="lengths at which beam is run (slow)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--measures", nargs="+", default=MEASURES, help=f"measures to time (default: {' '.join(MEASURES)})")
    p.add_argument("--no-bundle", action="store_true", help="skip the live-bundle timing")
    p.add_argument("--bundle-model", default="tiny-rt-masked-s0", help="the model of the live bundle (one of --models). "
                   "Default: tiny-rt-masked-s0")
    p.add_argument("--no-recursive", action="store_true", help="skip the recursive-masking timing")
    p.add_argument("--no-batched", action="store_true", help="skip the 16-inputs-at-once timing")
    p.add_argument("--bf16", action="store_true", help="also time bf16 autocast (emulated, ~20x slower, on CPUs "
                   "without AVX512-BF16: check `lscpu`)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: the engine's, 2)")
    p.add_argument("--skip-captum", nargs="*", default=[], help="measures whose captum reference is not timed")
    p.add_argument("--bf16-agreement", action="store_true", help="also measure bf16 vs float32 rank agreement "
                   "(40 rt test inputs per model; sets which measures accept bf16)")
    p.add_argument("--only-agreement", action="store_true", help="only the bf16 agreement table")
    p.add_argument("--base", action="store_true", help="only the live bundle on a base-sized model (random-weight "
                   "BERT-base, 110M parameters, loaded as a user's own folder) at --base-length tokens")
    p.add_argument("--base-length", type=int, default=128, help="T for --base. Default: 128")
    p.add_argument("--cpu-time", action="store_true", help="time with this process's CPU time instead of wall time "
                   "(with --threads 1: robust to other processes on a shared machine)")
    p.add_argument("--base-batch-sizes", type=int, nargs="+", default=[1, 8, 32], help="batch sizes tried for the peak "
                   "throughput with --base (a base model at T=128 peaks near 4096 tokens per pass on a CPU). Default: 1 8 32")
    p.add_argument("--smoke", action="store_true", help="CI smoke mode: the packaged tiny with a fresh head, T = 16, "
                   "1 repeat, a measure of each kind, the live bundle; the numbers mean nothing")
    args = p.parse_args()
    bundle_model = args.bundle_model
    if args.smoke:
        global SMOKE
        SMOKE = True
        args.models, args.lengths, args.beam_lengths, args.repeats = ["tiny"], [16], [16], 1
        args.measures = ["grad-l2", "x-grad-sign", "ig-sign", "loo-sign", "occlusion", "deeplift", "beam"]
        bundle_model = "tiny"
    configure()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
        print("Clock: this process's CPU time (--cpu-time), not wall time.")
    print(f"# bench/importance.py · code {code_version()} · torch {torch.__version__} · {cpu_description()} "
          f"· {os.cpu_count()} CPUs · {torch.get_num_threads()} threads · load average {os.getloadavg()[0]:.2f} at start")
    if args.base:
        print("\n| model | what | time | without sharing | forward-pass limit | ratio to limit |\n|---|---|---|---|---|---|")
        print("\n".join(bench_live_bundle(base_sized_model(), args.repeats, T=args.base_length,
                                           batch_sizes=tuple(args.base_batch_sizes))))
        print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
        return 0
    print("\nTimes: median of repeats, milliseconds, one input, explicit target. Limit = forward rows / peak forward "
          "throughput + fwd+bwd rows / peak fwd+bwd throughput at the same T.\n")
    available = []
    for model_id in args.models:
        try:
            get_model(model_id)
            available.append(model_id)
        except CheckpointError as err:
            print(f"{model_id}: not benchmarked, checkpoint not available ({err})")
    if args.bf16_agreement or args.only_agreement:
        print("\nbf16 autocast vs float32: Spearman per input (median, 5th percentile) and top-10% overlap. "
              "Tolerance: median >= 0.99, p5 >= 0.98, overlap >= 0.95.\n")
        print("| model | measure | median rho | p5 rho | top-10% overlap | tolerance | bf16 offered |\n|---|---|---|---|---|---|---|")
        for model_id in available:
            bf16_agreement(model_id)
        if args.only_agreement:
            return 0
    print("| model | T | measure | ours (ms) | ours bf16 (ms) | captum default (ms) | ours / captum | rows needed (fwd + fwd+bwd) | limit (ms) | ours / limit |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for model_id in available:
        rows += bench_model(model_id, args.lengths, args.repeats, set(args.beam_lengths), set(args.skip_captum),
                            args.measures, bf16=args.bf16)
    print("\nAll rows (the same, together):\n")
    print("| model | T | measure | ours (ms) | ours bf16 (ms) | captum default (ms) | ours / captum | rows needed (fwd + fwd+bwd) | limit (ms) | ours / limit |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if not args.no_batched:
        print("\n| model | T | measure | ours (ms) | limit (ms) | ours / limit |\n|---|---|---|---|---|---|")
        for model_id in available:
            bench_batched(model_id, args.repeats)
    if not args.no_recursive:
        print("\n| model | T | what | rows run (fwd + fwd+bwd) | limit | now | now / limit | before the fix (32 inputs a "
              "batch, 4096 tokens a pass) | before / limit | peak |\n|---|---|---|---|---|---|---|---|---|---|")
        for model_id in available:
            bench_recursive(model_id, args.repeats, **({"n_inputs": {"grad-l2": 4, "loo-sign": 2}, "words": 8,
                                                         "ratios": (0.0, 0.5, 1.0)} if args.smoke else
                                                        {"n_inputs": {"grad-l2": 128, "loo-sign": 32}}))
    if bundle_model in available and not args.no_bundle:
        print("\n| model | what | time | without sharing | forward-pass limit | ratio to limit |\n|---|---|---|---|---|---|")
        bundle = bench_live_bundle(bundle_model, args.repeats, **({"T": 16, "batch_sizes": (1, 4)} if args.smoke else {}))
        print("\n".join(bundle))
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    raise SystemExit(main())

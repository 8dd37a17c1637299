"""Speed of every metric family as a ratio to the forward-pass limit of its rows, and of the families that have a
reference implementation as a ratio to it (ours / reference) on the same inputs and perturbations.

For each metric family, on a batch of B test inputs of one dataset (length-sorted, as the sweep batches them),
with a fixed ranking: the CPU time (or wall time on CUDA) of the family's function (best of repeats, MaSF p-values
on, as the suite runs it; the erasure kernel's families through `erasure_metrics`, the others through their own
function: NAOPC, F-Fidelity, the randomisation test and the registry's Family.function families) against the
forward-pass limit of its rows = perturbed inputs forwarded (counted by the cost meter's hook) / the peak batched
forward throughput measured here at the same padded length T (best over batch sizes, plain forward, no hidden
states). Everything the metric does beyond those forwards (building the perturbed inputs, keeping the hidden states
for MaSF, the p-value look-ups, the bookkeeping) shows as the ratio above 1. The same without MaSF is shown too.
Max-/avg-sensitivity re-run the measure (--sensitivity-measure, memo off) on every neighbour: their limit is the
measure's own runs on the same rows plus the forwards of the MaSF p-values.

The second table: ours against the reference implementation on the same inputs, with perturbations of the same kind
and number (each drawn by its own generator): captum.metrics.infidelity and sensitivity_max (called directly, as
captum's documentation does), Quantus 0.6's FaithfulnessCorrelation (faithfulness correlation, and Sensitivity-n as
FaithfulnessCorrelation at subset size n, as tests/engine/test_metric_reference.py compares them) and ice-faithfulness
1.0.1's randomisation test, the last two where importable (--reference-path: a folder made by
`pip install --no-deps --target DIR 'quantus==0.6.*' scikit-image opencv-python-headless cachetools imageio tifffile
lazy_loader` or `... 'ice-faithfulness==1.0.1'`; neither pulls a torch of its own, the project's is used).

    python bench/erasure.py                                    # packaged tiny with a fresh head, rt, B = 32
    python bench/erasure.py --model tiny-rt-masked-s0 --repeats 5
    python bench/erasure.py --encoder minilm --batch 32
    python bench/erasure.py --reference-path /tmp/qpkgs --reference-path /tmp/icepkgs   # with Quantus and ICE
    python bench/erasure.py --smoke                            # CI: toy data, 4 inputs
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from engine.data import get_dataset  # noqa: E402
from engine.faithfulness.cost import counting_rows  # noqa: E402
from engine.faithfulness.erasure import erasure_metrics  # noqa: E402
from engine.faithfulness.ffidelity import ffidelity  # noqa: E402
from engine.faithfulness.naopc import add_naopc  # noqa: E402
from engine.faithfulness.perturb import rows_per_pass  # noqa: E402
from engine.faithfulness.randomisation import randomisation_test  # noqa: E402
from engine.faithfulness.registry import FAMILIES, kernel_families  # noqa: E402
from engine.importance import get_explainer  # noqa: E402
from engine.models import Classifier, load_classifier, resolve_encoder  # noqa: E402
from engine.ood import MaSF, calibration_features  # noqa: E402
from engine.runtime import code_version, configure  # noqa: E402

#: a family forwarding more rows than this per batch is timed --large-repeats times (module docstring)
LARGE_ROWS = 20_000
CLOCK = {"cpu": time.process_time, "wall": time.perf_counter}
clock = time.process_time


def timed(fn, repeats: int) -> float:
    """The best of `repeats` runs after one warm-up: on a shared machine the minimum is the run least disturbed by
    other processes, for the metric and for the forward-pass limit alike."""
    fn()
    times = []
    for _ in range(repeats):
        _sync()
        t = clock()
        fn()
        _sync()  # a GPU call returns before its kernels finish: stop the clock on the work, not the launch
        times.append(clock() - t)
    return min(times)


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def peak_forward(classifier: Classifier, T: int, repeats: int) -> float:
    """Rows per second of plain no-grad forward passes of T tokens, best over batch sizes."""
    best = 0.0
    for bs in (16, 32, 64, 128, 256):
        ids = torch.randint(1000, 2000, (bs, T), device=classifier.device)
        am, tt = torch.ones_like(ids), torch.zeros_like(ids)

        def fn():
            with torch.no_grad():
                classifier.model(input_ids=ids, attention_mask=am, token_type_ids=tt)
        best = max(best, bs / timed(fn, repeats))
    return best


def counted(classifier: Classifier, fn) -> tuple[int, int]:
    """(rows forwarded without gradients, rows forwarded with them) by one call of fn."""
    with counting_rows(classifier.counted_module) as rows:
        fn()
    return rows.forward, rows.backward


def forward_limit(classifier: Classifier, batch, rows: int, step: int) -> None:
    """The limit's work: `rows` rows of this batch's inputs forwarded, in passes of `step` rows."""
    index = torch.arange(min(step, max(rows, 1))) % len(batch)
    ids, am, tt = batch.input_ids[index], batch.attention_mask[index], batch.token_type_ids[index]
    with torch.no_grad():
        for start in range(0, rows, step):
            n = min(step, rows - start)
            classifier.model(input_ids=ids[:n], attention_mask=am[:n], token_type_ids=tt[:n])


def measure_runs(explain, batch, rows: int) -> None:
    """The measure on `rows` rows of this batch, as captum's sensitivity_max calls it: the B inputs, then the rest in
    one call."""
    explain(batch, batch.target)
    if rows > len(batch):
        rest = batch.select(torch.arange(rows - len(batch), device=batch.input_ids.device) % len(batch))
        explain(rest, rest.target)


def best_of(repeats: int, fns: dict, warm: bool = True) -> dict:
    """The best time of each of `fns` over `repeats` rounds, run interleaved (the machine's load drifts less between
    neighbouring runs than over the script); with `warm`, each is run once before, untimed."""
    for fn in fns.values() if warm else ():
        fn()
    best = {key: float("inf") for key in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            _sync()
            t = clock()
            fn()
            _sync()
            best[key] = min(best[key], clock() - t)
    return best


# -- reference implementations, on the same inputs with the same perturbations (each drawn by its own generator) --
def reference_infidelity(classifier: Classifier, batch, scores, samples: int = 20, probability: float = 0.2):
    """captum.metrics.infidelity as its documentation calls it: a perturbation that removes each maskable token with
    `probability` (returns I and inputs - I over 1-per-token presence inputs), a forward that writes [MASK] where a
    token is absent and returns the class probabilities; no MaSF, no bookkeeping."""
    from captum.metrics import infidelity

    device, B = batch.input_ids.device, len(batch)
    maskable, mask_id = batch.maskable, classifier.mask_token_id

    def perturb(inputs):
        drop = ((torch.rand(inputs.shape, device=device) < probability)
                & maskable.repeat_interleave(len(inputs) // B, 0)).double()
        return drop, inputs - drop

    def forward(inputs, ids, am, tt):
        with torch.no_grad():
            logits = classifier.model(input_ids=torch.where(inputs < 0.5, mask_id, ids), attention_mask=am,
                                      token_type_ids=tt).logits
        return torch.softmax(logits.double(), -1)

    return infidelity(forward, perturb, torch.ones(batch.input_ids.shape, dtype=torch.float64, device=device),
                      torch.nan_to_num(scores.double()).to(device), target=batch.target, n_perturb_samples=samples,
                      additional_forward_args=(batch.input_ids, batch.attention_mask, batch.token_type_ids))


def reference_sensitivity(classifier: Classifier, batch, explain, samples: int = 10, tokens: int = 1):
    """captum.metrics.sensitivity_max as its documentation calls it: a perturbation that sets `tokens` random
    maskable positions of the presence inputs to 0, an explanation function that writes [MASK] there and re-runs the
    measure; no MaSF, no avg-sensitivity."""
    from captum.metrics import sensitivity_max

    device, B = batch.input_ids.device, len(batch)
    maskable, mask_id = batch.maskable, classifier.mask_token_id

    def perturb(inputs, perturb_radius=0.0):
        inputs = inputs[0] if isinstance(inputs, tuple) else inputs  # captum passes its one input as a 1-tuple
        keys = torch.where(maskable.repeat_interleave(len(inputs) // B, 0), torch.rand(inputs.shape, device=device),
                           -1.0)
        return inputs.scatter(1, keys.topk(tokens, 1).indices, 0.0)

    def explanation(inputs, target):
        inputs = inputs[0] if isinstance(inputs, tuple) else inputs
        sub = batch.select(torch.arange(B, device=device).repeat_interleave(len(inputs) // B))
        sub = sub.with_ids(torch.where(inputs < 0.5, mask_id, sub.input_ids))
        with torch.enable_grad():
            return (explain(sub, target).detach().double(),)  # a tuple, as its inputs are

    return sensitivity_max(explanation, torch.ones(batch.input_ids.shape, dtype=torch.float64, device=device),
                           perturb_func=perturb, n_perturb_samples=samples, target=batch.target)


class QuantusModel:
    """What Quantus's evaluate_batch calls of a model, over a group of inputs with the same number N of maskable
    tokens: predict(x [g, N]) -> class probabilities [g, C], x the presence of each maskable token (Quantus's baseline
    0: the token replaced by [MASK])."""

    def __init__(self, classifier: Classifier, sub):
        self.classifier, self.sub = classifier, sub

    def shape_input(self, x, shape, channel_first=None, batched=False):
        return x

    def predict(self, x, **kwargs):
        removed = torch.zeros(self.sub.input_ids.shape, dtype=torch.bool, device=self.sub.input_ids.device)
        removed[self.sub.maskable] = torch.as_tensor(np.asarray(x) < 0.5, device=removed.device).reshape(-1)
        with torch.no_grad():
            logits = self.classifier.model(input_ids=torch.where(removed, self.classifier.mask_token_id,
                                                                 self.sub.input_ids),
                                           attention_mask=self.sub.attention_mask,
                                           token_type_ids=self.sub.token_type_ids).logits
        return torch.softmax(logits.double(), -1).cpu().numpy()


def reference_quantus_correlation(quantus, classifier: Classifier, batch, scores, sizes, subsets: int = 20) -> list:
    """quantus.FaithfulnessCorrelation (as scripts/tools/reference_quantus.py calls it: baseline 0, no normalising,
    no abs) per subset size in `sizes` (N -> n), one metric per group of inputs with the same N (Quantus's subset
    size is one number per metric; its features here are the N maskable tokens). n >= N or N < 2: no value (ours:
    NaN)."""
    n_tokens = batch.maskable.sum(1)
    out = []
    for size_of in sizes:
        for N in torch.unique(n_tokens).tolist():
            n = size_of(N)
            if n >= N or N < 2:
                continue
            index = torch.nonzero(n_tokens == N).flatten()
            sub = batch.select(index)
            metric = quantus.FaithfulnessCorrelation(nr_runs=subsets, subset_size=n, abs=False, normalise=False,
                                                     perturb_baseline=0.0, return_aggregate=False,
                                                     disable_warnings=True)
            a = scores.to(index.device)[index][sub.maskable].reshape(len(index), N).double().cpu().numpy()
            out += metric.evaluate_batch(model=QuantusModel(classifier, sub), x_batch=np.ones((len(index), N)),
                                         y_batch=sub.target.cpu().numpy(), a_batch=a)
    return out


def reference_ice(ice, evaluator, classifier: Classifier, batch, scores, k, n_sets: int) -> list:
    """ICE's randomisation test (ice-faithfulness 1.0.1, `ICEEvaluator._run_randomization_test`, n_sets random
    k-sets per input, the own set not excluded) on the quantity ours compares: the drop p_c(x) - p_c(x with the set
    [MASK]ed), by ICE's `ICEScorer.compute_comprehensiveness` with its `MaskOperator('mask')` (one row a forward, and
    p_c(x) forwarded again for every set)."""
    from engine.faithfulness.perturb import ranking_positions

    operator = ice.MaskOperator(classifier.tokenizer, mask_token="mask")
    rank = ranking_positions(scores.to(batch.input_ids.device), batch.maskable)
    out = []
    for b in range(len(batch)):
        ids, am, target = batch.input_ids[b], batch.attention_mask[b], int(batch.target[b])

        def drop(mask, ids=ids, am=am, target=target):
            return evaluator.scorer.compute_comprehensiveness(ids, am, mask, target, operator)["comprehensiveness_delta"]

        observed = drop((rank[b] < int(k[b])).long())
        out.append(evaluator._run_randomization_test(observed, ids, am, int(k[b]), drop)["p_value"])
    return out


def _importable(name: str):
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def references(args, classifier: Classifier, batch, scores, masf, explain, k, step: int, throughput: float) -> None:
    """Ours against each reference implementation on the same inputs and perturbations: time and rows."""
    from engine.faithfulness.correlation import faithfulness_correlation
    from engine.faithfulness.infidelity import infidelity
    from engine.faithfulness.sensitivity import max_sensitivity
    from engine.faithfulness.sensitivity_n import sensitivity_n, subset_size

    quantus, ice = _importable("quantus"), _importable("ice")
    levels = FAMILIES["sensitivity-n"].options[0][1]
    common = dict(target=batch.target, removal="mask", seed=0)
    rows = [("infidelity", "captum.metrics.infidelity (20 samples, p = 0.2)",
             lambda m: infidelity(classifier, batch, scores, masf=m, **common),
             lambda: reference_infidelity(classifier, batch, scores)),
            ("sensitivity", f"captum.metrics.sensitivity_max (10 neighbours, 1 token; {args.sensitivity_measure})",
             lambda m: max_sensitivity(classifier, batch, scores, explain=explain, masf=m, **common),
             lambda: reference_sensitivity(classifier, batch, explain))]
    if quantus is not None:
        rows += [("faithfulness-correlation", f"quantus {quantus.__version__} FaithfulnessCorrelation (20 subsets of "
                  "round(0.2 N)), one per group of equal N",
                  lambda m: faithfulness_correlation(classifier, batch, scores, masf=m, **common),
                  lambda: reference_quantus_correlation(quantus, classifier, batch, scores,
                                                        [lambda N: max(1, round(0.2 * N))])),
                 ("sensitivity-n", f"quantus {quantus.__version__} FaithfulnessCorrelation(subset_size=n) per level "
                  f"{', '.join(f'{x:g}' for x in levels)} and group of equal N",
                  lambda m: sensitivity_n(classifier, batch, scores, masf=m, **common),
                  lambda: reference_quantus_correlation(quantus, classifier, batch, scores,
                                                        [partial(subset_size, x) for x in levels]))]
    if ice is not None:
        evaluator = ice.ICEEvaluator(classifier.model, classifier.tokenizer,
                                     ice.ICEConfig(n_permutations=99, device=str(classifier.device), seed=0))
        rows.append(("randomisation", "ice-faithfulness ICEEvaluator._run_randomization_test (99 sets, k = max(1, "
                     "int(0.2 N)), MaskOperator, comprehensiveness drop)",
                     lambda m: randomisation_test(classifier, batch, scores, k, batch.target, "mask", seed=0),
                     lambda: reference_ice(ice, evaluator, classifier, batch, scores, k, 99)))
    print()
    print("| metric family | reference implementation | rows: ours / reference | ours (no MaSF) | reference | "
          "ours / reference | ours (MaSF on) / reference | reference / forward limit |")
    print("|---|---|---|---|---|---|---|---|")
    for family, name, ours, reference in rows:
        if args.families and family not in args.families:
            continue
        plain = partial(ours, None)
        fns = {"plain": plain, "reference": reference}
        if family != "randomisation":  # the randomisation test has no MaSF
            fns["masf"] = partial(ours, masf)
        mine, theirs = counted(classifier, plain), counted(classifier, reference)
        best = best_of(args.ice_repeats if family == "randomisation" else args.repeats, fns, warm=False)
        on = f"{best['masf'] / best['reference']:.2f}" if "masf" in best else "— (no MaSF)"
        # the reference against rows / the peak throughput (a family re-running the measure has no such limit)
        against = "—" if theirs[1] else f"{best['reference'] * throughput / theirs[0]:.2f}"
        print(f"| {family} | {name} | {sum(mine)} / {sum(theirs)} | {best['plain'] * 1e3:.0f} ms | "
              f"{best['reference'] * 1e3:.0f} ms | {best['plain'] / best['reference']:.2f} | {on} | {against} |")
    for missing, package in ((quantus is None, "quantus 0.6 (faithfulness-correlation, sensitivity-n)"),
                             (ice is None, "ice-faithfulness 1.0.1 (randomisation)")):
        if missing:
            print(f"# not importable here, not compared: {package}; --reference-path names a folder holding it")


def fresh_classifier(encoder: str, dataset) -> Classifier:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    source = resolve_encoder(encoder)
    model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=dataset.num_classes)
    from engine.runtime import pick_device

    return Classifier(model, AutoTokenizer.from_pretrained(source), dataset.classes, dataset.max_length,
                      {"id": f"{encoder} (fresh head)", "strategy": "masked"}, pick_device())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="checkpoint id (default: the packaged encoder with a fresh head)")
    parser.add_argument("--encoder", default="tiny", help="packaged encoder when no --model. Default: tiny")
    parser.add_argument("--dataset", default="rt")
    parser.add_argument("--batch", type=int, default=32, help="inputs per call. Default: 32")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calibration", type=int, default=300, help="validation inputs to fit MaSF on. Default: 300")
    parser.add_argument("--clock", choices=["cpu", "wall"], default=None,
                        help="cpu (default without CUDA): the process's CPU time, which other jobs on a shared machine "
                             "do not inflate (with 1 thread it is the work done); wall (default with CUDA, where the "
                             "work is the GPU's, not this process's): elapsed time")
    parser.add_argument("--threads", type=int, default=1,
                        help="intra-op threads (default 1: on a 2-core machine shared with other jobs, 2 threads make "
                             "every timing a measure of the neighbours)")
    parser.add_argument("--sensitivity-measure", default="grad-l2",
                        help="the measure max-/avg-sensitivity re-run on each neighbour. Default: grad-l2")
    parser.add_argument("--reference-path", action="append", default=[],
                        help="a folder holding Quantus 0.6 or ice-faithfulness 1.0.1 (e.g. `pip install --no-deps "
                             "--target DIR`), put after the project's packages on sys.path, so theirs are used; "
                             "repeatable. Without it, those references are compared only where importable")
    parser.add_argument("--ice-repeats", type=int, default=2,
                        help="repeats of the randomisation test against ICE's (ICE forwards one row at a time: "
                             "about 10 s a run on tiny). Default: 2")
    parser.add_argument("--large-repeats", type=int, default=1,
                        help=f"repeats of a family of more than {LARGE_ROWS} rows (NAOPC). Default: 1")
    parser.add_argument("--families", nargs="+", default=None, choices=list(FAMILIES), metavar="FAMILY",
                        help="only these metric families' rows (default: every one)")
    parser.add_argument("--smoke", action="store_true", help="CI smoke mode: toy data, 4 inputs, 1 repeat, MaSF on 40")
    args = parser.parse_args()
    if args.smoke:
        args.dataset, args.batch, args.repeats, args.calibration, args.ice_repeats = "toy", 4, 1, 40, 1
    sys.path.extend(args.reference_path)
    configure()
    torch.set_num_threads(args.threads)
    global clock
    clock = CLOCK[args.clock or ("wall" if torch.cuda.is_available() else "cpu")]
    torch.manual_seed(0)
    dataset = get_dataset(args.dataset)
    classifier = load_classifier(args.model) if args.model else fresh_classifier(args.encoder, dataset)
    masf = MaSF().fit(calibration_features(classifier, dataset.split("validation")[: args.calibration], "masked"))
    test = dataset.split("test")
    order = np.argsort([len(e.primary) + len(e.auxiliary or "") for e in test], kind="stable")
    middle = len(test) // 2
    batch = classifier.batch_of([test[i] for i in order[middle:middle + args.batch]])
    T = batch.input_ids.shape[1]
    scores = torch.rand(batch.input_ids.shape)
    throughput = peak_forward(classifier, T, args.repeats)
    print(f"# {classifier.id} on {args.dataset}: {len(batch)} test inputs, padded length T = {T}, "
          f"mean maskable tokens {batch.maskable.sum(1).float().mean():.1f}")
    print(f"# peak forward throughput at T = {T}: {throughput:.0f} rows/s; {platform.machine()}, {os.cpu_count()} cpus, "
          f"{torch.get_num_threads()} threads, {clock.__name__} clock, torch {torch.__version__}, code {code_version()}")
    print("| metric family | rows forwarded | time (MaSF on) | forward limit | ratio | time (no MaSF) | ratio |")
    print("|---|---|---|---|---|---|---|")
    step = rows_per_pass(T, classifier.device, classifier=classifier)
    ids = batch.input_ids[torch.arange(step) % len(batch)]
    am, tt = batch.attention_mask[torch.arange(step) % len(batch)], batch.token_type_ids[torch.arange(step) % len(batch)]
    for family in kernel_families():
        if args.families and family not in args.families:
            continue
        kwargs = dict(target=batch.target, metrics=[family], soft_draws=5, seed=0)
        res = erasure_metrics(classifier, batch, scores, masf=masf, **kwargs)
        rows = res.forward_rows + res.soft_rows

        def forwards(rows=rows):
            # The limit: the same number of rows of this batch's inputs, in passes of the size the metric uses.
            with torch.no_grad():
                for start in range(0, rows, step):
                    n = min(step, rows - start)
                    classifier.model(input_ids=ids[:n], attention_mask=am[:n], token_type_ids=tt[:n])

        # Interleaved, best of each: the machine's load drifts less between neighbouring runs than over the script.
        best = {"masf": float("inf"), "plain": float("inf"), "limit": float("inf")}
        for _ in range(args.repeats):
            for key, fn in (("masf", lambda: erasure_metrics(classifier, batch, scores, masf=masf, **kwargs)),
                            ("plain", lambda: erasure_metrics(classifier, batch, scores, masf=None, **kwargs)),
                            ("limit", forwards)):
                t = clock()
                fn()
                best[key] = min(best[key], clock() - t)
        limit = min(best["limit"], rows / throughput)
        print(f"| {family} | {rows} | {best['masf'] * 1e3:.0f} ms | {limit * 1e3:.0f} ms | {best['masf'] / limit:.2f} | "
              f"{best['plain'] * 1e3:.0f} ms | {best['plain'] / limit:.2f} |")
    # Families computed by a function of their own (Family.function), NAOPC, F-Fidelity and the randomisation test:
    # the same ratio, with the rows each forwards counted by the cost meter's hook (engine/faithfulness/cost.py).
    # Sensitivity re-runs the measure (grad-l2 here) on every neighbour: its limit is the measure's own runs on the
    # same inputs plus the forwards of its MaSF p-values. The measure's memo is off: every repeat re-runs the measure
    # on the same neighbours, which the memo would otherwise answer from its cache.
    explainer = get_explainer(args.sensitivity_measure, classifier, memo=False)

    def explain(b, t):
        return explainer.attribute(b, t).scores

    k = (batch.maskable.sum(1) * 0.2).long().clamp_min(1)  # ICE's rationale size: max(1, int(0.2 N))
    extra = {"naopc": lambda masf_: add_naopc(erasure_metrics(classifier, batch, scores, target=batch.target,
                                                              metrics=["comprehensiveness"], masf=masf_, seed=0),
                                              classifier, batch, scores, target=batch.target),
             "f-fidelity": lambda masf_: ffidelity(classifier, batch, scores, target=batch.target, masf=masf_, seed=0),
             "randomisation": lambda masf_: randomisation_test(classifier, batch, scores, k, batch.target, "mask",
                                                               seed=0)}
    for family in FAMILIES:
        if args.families and family not in args.families:
            continue
        if family in extra:
            fn = extra[family]
        elif FAMILIES[family].function:
            fn = FAMILIES[family].load()
            more = {"explain": explain} if "measure" in FAMILIES[family].needs else {}
            fn = partial(lambda masf_, fn, more: fn(classifier, batch, scores, target=batch.target, masf=masf_,
                                                    removal="mask", seed=0, **more), fn=fn, more=more)
        else:
            continue
        uses_masf = family != "randomisation"  # the randomisation test forwards its sets without MaSF
        rows = {"masf": counted(classifier, lambda: fn(masf))}  # counting runs are the warm-up runs too
        # a family of more than LARGE_ROWS rows (NAOPC's bound searches: ~90,000 on tiny x rt, 40 CPU-s a run) runs
        # --large-repeats times, with the same rows with and without MaSF, and its limit is rows / peak throughput
        large = sum(rows["masf"]) > LARGE_ROWS
        rows["plain"] = rows["masf"] if large else counted(classifier, lambda: fn(None))
        limit_fns = {key: partial(forward_limit, classifier, batch, rows[key][0], step) for key in rows}
        if rows["masf"][1]:  # the measure's own runs (grad-enabled rows): what captum's sensitivity_max asks for
            limit_fns = {key: partial(lambda f, n: (f(), measure_runs(explain, batch, n)), limit_fns[key],
                                      rows[key][1]) for key in rows}
        fns = {"masf": lambda: fn(masf), "plain": lambda: fn(None)} if uses_masf else {"plain": lambda: fn(None)}
        if not large:
            fns["limit-plain"] = limit_fns["plain"]
            if uses_masf and rows["plain"] != rows["masf"]:
                fns["limit-masf"] = limit_fns["masf"]
        best = best_of(args.large_repeats if large else args.repeats, fns, warm=False)
        best.setdefault("limit-plain", float("inf"))
        best.setdefault("limit-masf", best["limit-plain"])
        forwarded, backward = rows["masf" if uses_masf else "plain"]
        label = family
        shown = f"{forwarded}" + (f" + the measure on {backward}" if backward else "")
        if forwarded == 0 and not backward:  # a property of the scores alone: no forward, so no limit
            print(f"| {label} | 0 | {best['masf'] * 1e3:.1f} ms | — | — | {best['plain'] * 1e3:.1f} ms | — |")
            continue
        limits = {key: min(best[f"limit-{key}"], rows[key][0] / throughput) if not rows[key][1]
                  else best[f"limit-{key}"] for key in rows}
        on = (f"{best['masf'] * 1e3:.0f} ms | {limits['masf'] * 1e3:.0f} ms | {best['masf'] / limits['masf']:.2f}"
              if uses_masf else f"— (no MaSF) | {limits['plain'] * 1e3:.0f} ms | —")
        off = f"{best['plain'] * 1e3:.0f} ms | {best['plain'] / limits['plain']:.2f}"
        if uses_masf and rows["plain"] != rows["masf"]:
            off += f" (its own limit: {limits['plain'] * 1e3:.0f} ms)"
        print(f"| {label} | {shown} | {on} | {off} |")
    references(args, classifier, batch, scores, masf, explain, k, step, throughput)
    again = peak_forward(classifier, T, args.repeats)
    print(f"# forward limit: the faster of (a) the same rows of this batch in passes of {step} rows, timed between the "
          f"metric's runs, (b) rows / peak throughput ({throughput:.0f} rows/s before, {again:.0f} after the metrics)")


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    main()

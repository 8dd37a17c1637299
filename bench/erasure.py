"""Speed of the erasure metrics and of the metric families computed by functions of their own (faithfulness
correlation, infidelity, Sensitivity-n, properties: engine/faithfulness/registry.py), as ratios to the forward-pass
limit.

For each metric family, on a batch of B test inputs of one dataset (length-sorted, as the sweep batches them),
with a fixed ranking: the wall time of `erasure_metrics` (median of repeats, MaSF p-values on, as the suite runs
it) against the forward-pass limit of its rows = perturbed inputs forwarded / the peak batched forward
throughput measured here at the same padded length T (best over batch sizes, plain forward, no hidden states).
Everything the metric does beyond those forwards (building the perturbed inputs, keeping the hidden states for
MaSF, the p-value look-ups, the bookkeeping) shows as the ratio above 1. The same without MaSF is shown too.

    python bench/erasure.py                                    # packaged tiny with a fresh head, rt, B = 32
    python bench/erasure.py --model tiny-rt-masked-s0 --repeats 5
    python bench/erasure.py --encoder minilm --batch 32
    python bench/erasure.py --smoke                            # CI: toy data, 4 inputs
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from engine.data import get_dataset  # noqa: E402
from engine.faithfulness.erasure import erasure_metrics  # noqa: E402
from engine.faithfulness.perturb import rows_per_pass  # noqa: E402
from engine.faithfulness.registry import FAMILIES, function_families, kernel_families  # noqa: E402
from engine.models import Classifier, load_classifier, resolve_encoder  # noqa: E402
from engine.ood import MaSF, calibration_features  # noqa: E402
from engine.runtime import code_version, configure  # noqa: E402

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
    parser.add_argument("--smoke", action="store_true", help="CI smoke mode: toy data, 4 inputs, 1 repeat, MaSF on 40")
    args = parser.parse_args()
    if args.smoke:
        args.dataset, args.batch, args.repeats, args.calibration = "toy", 4, 1, 40
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
          f"{torch.get_num_threads()} threads, {args.clock} time, torch {torch.__version__}, code {code_version()}")
    print("| metric family | rows forwarded | time (MaSF on) | forward limit | ratio | time (no MaSF) | ratio |")
    print("|---|---|---|---|---|---|---|")
    step = rows_per_pass(T, classifier.device, classifier=classifier)
    ids = batch.input_ids[torch.arange(step) % len(batch)]
    am, tt = batch.attention_mask[torch.arange(step) % len(batch)], batch.token_type_ids[torch.arange(step) % len(batch)]
    for family in kernel_families():
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
    # Families computed by a function of their own (Family.function): the same ratio. Infidelity is captum's own
    # implementation (captum.metrics.infidelity, fed token-removal perturbations), so its "ours / reference" is 1 by
    # construction and its ratio is captum's cost beyond the forwards. Max-/avg-sensitivity re-run the measure on
    # every neighbour (its cost is the measure's): left out here.
    for family in function_families():
        if "measure" in FAMILIES[family].needs:
            continue
        fn = FAMILIES[family].load()

        def run(masf_=masf, fn=fn):
            return fn(classifier, batch, scores, target=batch.target, masf=masf_, removal="mask", seed=0)

        rows = run().forward_rows

        def forwards(rows=rows):
            with torch.no_grad():
                for start in range(0, rows, step):
                    n = min(step, rows - start)
                    classifier.model(input_ids=ids[:n], attention_mask=am[:n], token_type_ids=tt[:n])

        best = {"masf": float("inf"), "plain": float("inf"), "limit": float("inf")}
        for _ in range(args.repeats):
            for key, f in (("masf", run), ("plain", lambda: run(None)), ("limit", forwards)):
                t = clock()
                f()
                best[key] = min(best[key], clock() - t)
        if rows == 0:  # a property of the scores alone: no forward, so no limit to compare with
            print(f"| {family} | 0 | {best['masf'] * 1e3:.1f} ms | — | — | {best['plain'] * 1e3:.1f} ms | — |")
            continue
        limit = min(best["limit"], rows / throughput)
        print(f"| {family} | {rows} | {best['masf'] * 1e3:.0f} ms | {limit * 1e3:.0f} ms | {best['masf'] / limit:.2f} | "
              f"{best['plain'] * 1e3:.0f} ms | {best['plain'] / limit:.2f} |")
    again = peak_forward(classifier, T, args.repeats)
    print(f"# forward limit: the faster of (a) the same rows of this batch in passes of {step} rows, timed between the "
          f"metric's runs, (b) rows / peak throughput ({throughput:.0f} rows/s before, {again:.0f} after the metrics)")


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    main()

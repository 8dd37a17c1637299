"""Interactive speed of explanations on a prompted LLM (SmolLM2 by default), at its real prompt length:

  (a) the live bundle (engine.explain.LIVE_MEASURES, results shared through the memo, target = prediction) against
      the forward-pass limit: the forward rows and forward+backward rows the bundle needs, divided by the peak
      batched throughput of the same prompted classifier at the same length (target: within 1.5x);
  (b) the first heatmap's latency on the Explain path (`explain_text` with the measures cheapest first, as the
      Explain page calls it, until its first `on_measure` callback) as a multiple of one forward+backward pass of
      the same input (target: 2x).

The input is the rt test sentence of median length, in the model's prompt. Clock: this process's CPU time with one
torch thread (a shared machine's other jobs do not inflate it); `--wall` for wall time.

    ENGINE_THREADS=1 python bench/llm_explain_speed.py --model smollm2-rt-prompt --repeats 1 --batch-sizes 1 8 32
    python bench/llm_explain_speed.py --smoke      # CI: a random-weight 2-layer Llama, one repeat
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import torch
from _llm_smoke import start_bench, tiny_prompted
from _smoke import SMOKE_HELP
from _timing import live_bundle, sync

from engine.explain import LIVE_MEASURES, by_cost, explain_text
from engine.faithfulness.cost import counting_rows
from engine.importance import clear_memo
from engine.importance.batching import explained
from engine.runtime import code_version

CLOCK = time.process_time
BATCH_SIZES = (1, 4, 16, 32)


def timed(fn, repeats: int) -> float:
    """Median time of fn() on CLOCK over `repeats` runs after one warm-up, the GPU synchronised around each run."""
    fn()
    times = []
    for _ in range(repeats):
        sync()
        t = CLOCK()
        fn()
        sync()  # a GPU call returns before its kernels finish: stop the clock on the work, not the launch
        times.append(CLOCK() - t)
    return statistics.median(times)



def median_sentence(dataset: str = "rt") -> str:
    from engine.data import get_dataset

    test = get_dataset(dataset).split("test")
    ordered = sorted(test, key=lambda e: (len(e.primary.split()), e.primary))
    return ordered[len(ordered) // 2].primary


def one_forward_backward(classifier, batch, target: int):
    """One forward+backward pass of the input: the explained logit's gradient w.r.t. the word embeddings, as the
    gradient measures take it."""
    def fn():
        e = classifier.word_embeddings(batch.input_ids).detach().requires_grad_(True)
        logit = explained(classifier, classifier.logits_from_embeddings(e, batch))[0, target]
        torch.autograd.grad(logit, e)
    return fn


def peak_throughput(classifier, batch, target: int, backward: bool, repeats: int, sizes=BATCH_SIZES) -> tuple[float, int]:
    """(rows per second, best batch size) of the prompted classifier's forward (or forward+backward w.r.t. the word
    embeddings) on copies of the input's prompt."""
    best = (0.0, 1)
    for bs in sizes:
        ids, mask = batch.input_ids.repeat(bs, 1), batch.attention_mask.repeat(bs, 1)
        if backward:
            e0 = classifier.word_embeddings(ids).detach()

            def fn():
                e = e0.clone().requires_grad_(True)
                out = explained(classifier, classifier.forward(inputs_embeds=e, attention_mask=mask).logits)[:, target].sum()
                torch.autograd.grad(out, e)
        else:
            def fn():
                with torch.no_grad():
                    classifier.forward(input_ids=ids, attention_mask=mask)
        t = timed(fn, repeats)
        if bs / t > best[0]:
            best = (bs / t, bs)
    return best


def main(argv=None) -> int:
    global CLOCK
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-rt-prompt")
    p.add_argument("--text", default=None, help="the input (default: the rt test sentence of median length)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES),
                   help=f"batch sizes tried for the peak throughput. Default: {' '.join(map(str, BATCH_SIZES))}")
    p.add_argument("--wall", action="store_true", help="wall time instead of this process's CPU time")
    p.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = p.parse_args(argv)
    CLOCK = start_bench(args.smoke, args.wall)
    if args.smoke:
        classifier, args.repeats, sizes = tiny_prompted(), 1, (1, 4)
    else:
        from engine.models import load_classifier

        classifier, sizes = load_classifier(args.model), tuple(args.batch_sizes)
    text = args.text or median_sentence()
    batch = classifier.batch([text])
    T, N = int(batch.input_ids.shape[1]), int(batch.maskable.sum())
    with torch.no_grad():
        target = int(classifier.logits(batch).argmax())
    print(f"# bench/llm_explain_speed.py · code {code_version()} · torch {torch.__version__} · "
          f"{platform.processor() or platform.machine()} · {os.cpu_count()} CPUs · {torch.get_num_threads()} thread · "
          f"clock {'wall' if args.wall else 'process CPU time'} · load average {os.getloadavg()[0]:.2f} at start")
    print(f"model {classifier.id}: prompt of {T} tokens, {N} of them the input slot; input: {text!r}")

    # (a) the live bundle against the forward-pass limit
    explainers, bundle, separately = live_bundle(classifier, batch)

    counted = classifier.counted_module  # a prompted LM runs its base model
    clear_memo(classifier.model)
    with counting_rows(counted) as rows:
        bundle()
    t_bundle = timed(bundle, args.repeats)
    t_sep = timed(separately, max(1, args.repeats // 2))
    fwd_peak, fwd_bs = peak_throughput(classifier, batch, target, False, args.repeats, sizes)
    bwd_peak, bwd_bs = peak_throughput(classifier, batch, target, True, args.repeats, sizes)
    # the path points IG computed, over every attempt of its completeness check (engine.importance.completeness)
    ig_steps = int(explainers[LIVE_MEASURES.index("ig-sign")].attribute(batch).extras["path_points"][0])
    # needed: prediction 1 + IG end points 2 + LOO N copies (the unmasked row is the prediction) forward;
    # one gradient (grad-l2 and x-grad-sign share it) + IG's steps forward+backward
    n_fwd, n_bwd = 1 + 2 + N, 1 + ig_steps
    limit = n_fwd / fwd_peak + n_bwd / bwd_peak
    print(f"\npeak throughput at T={T}: forward {fwd_peak:.2f} rows/s (batch {fwd_bs}), forward+backward {bwd_peak:.2f} "
          f"rows/s (batch {bwd_bs}); batch sizes tried {sizes}")
    print(f"rows the bundle ran: {rows.forward} forward + {rows.backward} forward+backward (needed {n_fwd} + {n_bwd})")
    print("\n| model | T (slot) | live bundle, shared | one by one | forward-pass limit | ratio to limit |\n|---|---|---|---|---|---|")
    print(f"| {classifier.id} | {T} ({N}) | {t_bundle:.2f} s | {t_sep:.2f} s | {limit:.2f} s ({n_fwd} fwd + {n_bwd} "
          f"fwd+bwd rows) | **{t_bundle / limit:.2f}x** |")

    # (b) the first heatmap on the Explain path
    order = by_cost(list(LIVE_MEASURES))
    t_pass = timed(one_forward_backward(classifier, batch, target), args.repeats)
    firsts, totals, first_name = [], [], None

    class First(Exception):
        pass

    for _ in range(args.repeats + 1):  # the first run is the warm-up
        clear_memo(classifier.model)
        seen = {}
        start = CLOCK()

        def on_measure(measure, result, seen=seen, start=start):
            if "first" not in seen:
                seen["first"], seen["name"] = CLOCK() - start, measure

        explain_text(classifier, text, measures=order, on_measure=on_measure)
        firsts.append(seen["first"])
        totals.append(CLOCK() - start)
        first_name = seen["name"]
    first, total = statistics.median(firsts[1:]), statistics.median(totals[1:])
    print(f"\n| model | T | one forward+backward | first heatmap ({first_name}) | ratio | all {len(order)} heatmaps |"
          "\n|---|---|---|---|---|---|")
    print(f"| {classifier.id} | {T} | {t_pass * 1e3:.0f} ms | {first * 1e3:.0f} ms | **{first / t_pass:.2f}x** | "
          f"{total:.2f} s |")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    sys.exit(main())

"""Gradient measures on a prompted LLM with the prompt's prefix served from the key/value cache, against the whole
prompt run forward and backward (docs/llm.md#gradient-measures-over-the-cached-prefix).

In a causal LM the prompt before the slot does not depend on the slot, so a gradient measure needs forward and
backward passes over the suffix only: `PromptedClassifier.logits_from_embeddings` serves the prefix from
engine/models/prefix_cache.py when every row starts with the template prefix's embeddings (the gradient passes
interpolate the slot only). For each measure and input this prints the CPU time with the cache on and off, their
ratio, and the largest score difference between the two (the same numbers to float rounding is the contract).
Target: the ratio approaches the prefix share T / (T - P) for the measures whose cost is the model's passes.

Clock: this process's CPU time with one torch thread (other jobs on a shared machine do not inflate it).

    ENGINE_THREADS=1 python bench/llm_gradient_prefix_cache.py --model smollm2-rt-lora --inputs 1
    python bench/llm_gradient_prefix_cache.py --smoke      # CI: a random-weight 2-layer Llama, one input
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import torch
from _llm_smoke import start_bench, tiny_prompted
from _smoke import SMOKE_HELP

from engine.importance import get_explainer
from engine.models.prefix_cache import shared_prefix_length
from engine.runtime import code_version

CLOCK = time.process_time
GRADIENT_MEASURES = ("grad-l2", "x-grad-sign", "ig-sign", "gradient-shap", "deeplift")


def timed(fn):
    t = CLOCK()
    out = fn()
    return out, CLOCK() - t


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-rt-lora", help="a prompted LM id")
    p.add_argument("--inputs", type=int, default=1, help="rt test sentences (from the median length up, seeded order)")
    p.add_argument("--measures", nargs="+", default=list(GRADIENT_MEASURES), choices=GRADIENT_MEASURES)
    p.add_argument("--ig-steps", type=int, default=20, help="IG's steps (fixed, so both runs do the same work)")
    p.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = p.parse_args(argv)
    start_bench(args.smoke)
    if args.smoke:
        clf, args.ig_steps = tiny_prompted(), 4
        texts = ["a gripping , funny and moving film"]
    else:
        from engine.data import get_dataset
        from engine.models import load_classifier

        clf = load_classifier(args.model)
        test = sorted(get_dataset("rt").split("test"), key=lambda e: (len(e.primary.split()), e.primary))
        texts = [test[len(test) // 2 + i].primary for i in range(args.inputs)]
    print(f"# bench/llm_gradient_prefix_cache.py · code {code_version()} · torch {torch.__version__} · "
          f"{platform.processor() or platform.machine()} · {os.cpu_count()} CPUs · 1 thread · process CPU time · "
          f"load average {os.getloadavg()[0]:.2f} at start")
    print("\n| input | T (P prefix) | measure | cached | whole prompt | whole / cached | prefix share T/(T-P) | "
          "max score difference |")
    print("|---|---|---|---|---|---|---|---|")
    # max_steps = steps: IG's escalation off, so both runs do exactly the same passes
    options = {"ig-sign": {"steps": args.ig_steps, "max_steps": args.ig_steps}}
    for n, text in enumerate(texts):
        batch = clf.batch([text])
        T = int(batch.input_ids.shape[1])
        P = shared_prefix_length(batch.input_ids, batch.attention_mask, clf.template_prefix_ids())
        with torch.no_grad():
            target = torch.tensor([int(clf.logits(batch).argmax())])
        for m in args.measures:
            ex = get_explainer(m, clf, memo=False, **options.get(m, {}))
            clf.prefix_cache = True
            cached, t_cached = timed(lambda ex=ex: ex.attribute(batch, target=target))
            clf.prefix_cache = False
            whole, t_whole = timed(lambda ex=ex: ex.attribute(batch, target=target))
            clf.prefix_cache = True
            diff = float((cached.scores.double() - whole.scores.double()).abs().max())
            print(f"| {n} | {T} ({P}) | {m} | {t_cached:.2f} s | {t_whole:.2f} s | **{t_whole / t_cached:.2f}x** | "
                  f"{T / max(T - P, 1):.2f} | {diff:.1e} |")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    sys.exit(main())

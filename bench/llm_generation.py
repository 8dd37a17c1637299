"""Generation speed of the engine's `Generator` (engine/selfexplain/generation.py: transformers `generate` with the KV
cache, a streamer handing out each piece of text and a stopping criterion polled after every token) against a plain
`model.generate(..., use_cache=True)` of transformers on the same prompt with the same greedy settings, in new
tokens per second. The prompt is the counterfactual self-explanation request for the rt test sentence of median
length; the disk cache is off, so every run generates. Both produce the same tokens (checked).

Clock: this process's CPU time with one torch thread (robust to other jobs on a shared machine); `--wall` for wall.

    ENGINE_THREADS=1 python bench/llm_generation.py --model smollm2-rt-prompt --max-new-tokens 64 --repeats 3
    python bench/llm_generation.py --smoke      # CI: a random-weight 2-layer Llama, 8 tokens, one repeat
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

from engine.runtime import code_version

CLOCK = time.process_time


def main(argv=None) -> int:
    global CLOCK
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-rt-prompt")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--wall", action="store_true", help="wall time instead of this process's CPU time")
    p.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = p.parse_args(argv)
    CLOCK = start_bench(args.smoke, args.wall)
    from engine.selfexplain import DecodingSettings, Generator
    from engine.selfexplain.parsing import explanation_request

    if args.smoke:
        classifier, args.max_new_tokens, args.repeats = tiny_prompted(), 8, 1
    else:
        from engine.models import load_classifier

        classifier = load_classifier(args.model)
    from llm_explain_speed import median_sentence

    generator = Generator(classifier, DecodingSettings(max_new_tokens=args.max_new_tokens), cache=False)
    prompt = generator.chat_prompt(explanation_request("counterfactual", median_sentence(), target="negative"))
    tokenizer, model = classifier.tokenizer, classifier.model
    ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"].to(classifier.device)

    def plain():
        with torch.no_grad():
            return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.max_new_tokens,
                                  do_sample=False, use_cache=True, pad_token_id=tokenizer.pad_token_id,
                                  temperature=None, top_p=None, top_k=None)

    pieces = []

    def engine():
        pieces.clear()
        return generator.generate(prompt, on_text=pieces.append, should_stop=lambda: False)

    out = plain()
    new_tokens = int(out.shape[1] - ids.shape[1])
    reference = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    ours = engine()
    same = ours.strip() == reference.strip()

    def timed(fn):
        times = []
        for _ in range(args.repeats):
            t = CLOCK()
            fn()
            times.append(CLOCK() - t)
        return statistics.median(times)

    t_plain, t_engine = timed(plain), timed(engine)
    print(f"# bench/llm_generation.py · code {code_version()} · torch {torch.__version__} · "
          f"{platform.processor() or platform.machine()} · {os.cpu_count()} CPUs · {torch.get_num_threads()} thread · "
          f"clock {'wall' if args.wall else 'process CPU time'} · load average {os.getloadavg()[0]:.2f}")
    print(f"model {classifier.id}: prompt of {ids.shape[1]} tokens, {new_tokens} new tokens (greedy, at most "
          f"{args.max_new_tokens}); same text from both: {same}; {len(pieces)} streamed pieces")
    print("\n| model | prompt tokens | new tokens | transformers generate (KV cache) | engine Generator | engine / plain |"
          "\n|---|---|---|---|---|---|")
    print(f"| {classifier.id} | {ids.shape[1]} | {new_tokens} | {new_tokens / t_plain:.1f} tokens/s | "
          f"{new_tokens / t_engine:.1f} tokens/s | **{t_plain / t_engine:.2f}x** the speed |")
    if not same:
        print(f"the texts differ:\n  plain:  {reference!r}\n  engine: {ours!r}")
        return 1
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    sys.exit(main())

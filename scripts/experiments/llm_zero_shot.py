"""Zero-shot accuracy of a prompted language model on a seeded sample of a dataset's test split, with a
95% Wilson interval, the share predicted per class and the label-word coverage (sum over the verbalizer of
p_LM(word), single-token words only).

    ENGINE_THREADS=1 python scripts/experiments/llm_zero_shot.py --model smollm2 --dataset rt --n 300 --seed 0 \
        --out results/llm/smollm2-rt-zero-shot.json

--model: a packaged LLM key or a causal-LM folder (prompted with --prompt SPEC.json, default: the project's
sentiment prompt with --replacement); or a registered prompted id such as smollm2-rt-prompt.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

# The smoke helpers live with the benches (bench/_smoke.py).
from engine.smoke import SMOKE_HELP, print_and_write, use_scratch_folders


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion k/n (95% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--prompt", default=None, help="a prompt spec JSON (default: the project's sentiment prompt)")
    parser.add_argument("--replacement", default="redacted", help="replacement of the default prompt")
    parser.add_argument("--dataset", default="rt")
    parser.add_argument("--split", default="test")
    parser.add_argument("--n", type=int, default=300, help="sentences sampled (seeded) from the split; 0 = all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--out", default=None, help="write the result as JSON here")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args(argv)
    if args.smoke:  # CI: the packaged SmolLM2 converted into a scratch cache, 4 sentences; the numbers mean nothing
        use_scratch_folders()
        args.n, args.batch_size, args.out = 4, 4, None

    import torch

    from engine.data import load_dataset
    from engine.models.llm_package import PACKAGED_LLMS
    from engine.models.prompt_spec import PromptSpec, sentiment_prompt
    from engine.models.prompted_loading import load_prompted

    start = time.time()
    if args.model in PACKAGED_LLMS or Path(args.model).is_dir():
        spec = PromptSpec.load(args.prompt) if args.prompt else sentiment_prompt(args.replacement)
        classifier = load_prompted(args.model, spec)
    else:
        from engine.models import load_classifier

        classifier = load_classifier(args.model)
    dataset = load_dataset(args.dataset)
    dataset = classifier.check_dataset(dataset)  # labels in the classifier's class order
    examples = dataset.split(args.split)
    if args.n and args.n < len(examples):
        pick = np.random.default_rng(args.seed).choice(len(examples), size=args.n, replace=False)
        examples = [examples[i] for i in sorted(pick)]
    loaded = time.time()
    probs = classifier.predict_examples(examples, batch_size=args.batch_size,
                                        progress=lambda d, t: print(f"\r{d}/{t}", end="", file=sys.stderr, flush=True))
    print(file=sys.stderr)
    y = np.array([e.label for e in examples])
    pred = probs.argmax(-1)
    k, n = int((pred == y).sum()), len(y)
    low, high = wilson(k, n)
    coverage = None
    if classifier.single_token_words:  # mass the LM puts on the label words at all
        with torch.no_grad():
            batch = classifier.batch_of(examples[:64])
            out = classifier.model.base_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
            last = classifier.pooled_positions(batch.attention_mask)
            logp = classifier.vocabulary_log_probs(out.last_hidden_state[torch.arange(len(batch)), last])
            ids = torch.tensor([t[0] for _, t in classifier.label_word_tokens])
            coverage = float(logp[:, ids].exp().sum(1).mean())
    from engine.sweeps import provenance

    meta = classifier.meta
    command = "python scripts/experiments/llm_zero_shot.py " + " ".join(argv if argv is not None else sys.argv[1:])
    # The one provenance record (command, code version, time, machine, runtime, weights), then this script's figures.
    result = {
        **provenance(command, start, checkpoint_sha256=meta.weights_sha256),
        "model": classifier.id, "base_model": meta.base_model,
        "weights_sha256": meta.weights_sha256, "prompt": dict(meta.prompt or {}),
        "dataset": args.dataset, "split": args.split, "n": n, "seed": args.seed, "accuracy": k / n, "n_correct": k,
        "ci95_wilson": [low, high],
        "predicted_share": {c: float((pred == i).mean()) for i, c in enumerate(classifier.classes)},
        "gold_share": {c: float((y == i).mean()) for i, c in enumerate(classifier.classes)},
        "label_word_coverage_first64": coverage, "threads": torch.get_num_threads(),
        "seconds_load": round(loaded - start, 1), "seconds_predict": round(time.time() - loaded, 1),
    }
    return print_and_write(result, args.out)


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    raise SystemExit(main())

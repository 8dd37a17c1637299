"""MaSF share of p < 0.05 on randomly masked test inputs of a (prompted) classifier, for docs/llm.md's
"Masked LoRA fine-tuning" section: MaSF is fitted on the first N validation inputs transformed like the model's
training (zero-shot: unmasked; masked fine-tuning: FMM's half-batch masking), then a seeded sample of test inputs
is masked at each ratio (`mask_random_fraction`: floor(ratio * n) slot tokens) and tested.

    ENGINE_THREADS=1 python scripts/experiments/lora_masf.py --model smollm2-rt-prompt --calibration 450 --test-sample 100 \
        --ratios 0.3 0.6 --out results/llm/masf450-smollm2-rt-zero-shot.json
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

# The smoke helpers live with the benches (bench/_smoke.py).
from engine.smoke import SMOKE_HELP, print_and_write, use_scratch_folders


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-rt-prompt", help="model id or folder. Default: smollm2-rt-prompt")
    parser.add_argument("--dataset", default="rt")
    parser.add_argument("--calibration", type=int, default=120, help="first N validation inputs to fit MaSF on")
    parser.add_argument("--test-sample", type=int, default=100, help="seeded sample of N test inputs")
    parser.add_argument("--seed", type=int, default=0, help="seed of the test sample and of the masking")
    parser.add_argument("--ratios", type=float, nargs="+", default=[0.3, 0.6])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--out", default=None)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args(argv)
    if args.smoke:  # CI: the packaged SmolLM2 in a scratch cache, MaSF on 36 inputs, 4 test inputs; numbers mean nothing
        use_scratch_folders()
        args.model, args.calibration, args.test_sample, args.ratios, args.out = "smollm2-rt-prompt", 36, 4, [0.5], None

    import torch

    from engine.data import get_dataset
    from engine.models import load_classifier
    from engine.models.masking import STRATEGIES, mask_random_fraction
    from engine.ood import MaSF, calibration_features, calibration_strategy, hidden_state_features

    start = time.time()
    classifier = load_classifier(args.model)
    dataset = get_dataset(args.dataset, classifier.metadata.get("split_seed", 0))
    dataset = classifier.check_dataset(dataset)  # labels in the classifier's class order
    strategy = calibration_strategy(classifier)
    strategy = strategy if strategy in STRATEGIES else "plain"  # a zero-shot LM saw unmasked text only
    calibration = dataset.split("validation")[: args.calibration]
    feats = calibration_features(classifier, calibration, strategy, seed=1234, batch_size=args.batch_size)
    masf = MaSF(seed=0).fit(feats)
    test = dataset.split("test")
    pick = np.random.default_rng(args.seed).choice(len(test), size=min(args.test_sample, len(test)), replace=False)
    test = [test[i] for i in sorted(pick)]
    shares = {}
    for ratio in args.ratios:
        generator = torch.Generator().manual_seed(args.seed)
        p = []
        for s in range(0, len(test), args.batch_size):
            batch = classifier.batch_of(test[s:s + args.batch_size]).to("cpu")
            batch = mask_random_fraction(batch, ratio, classifier.mask_token_id, generator).to(classifier.device)
            with torch.no_grad():
                p.append(masf.pvalues(hidden_state_features(classifier, batch)))
        p = np.concatenate(p)
        shares[str(ratio)] = {"share_p_below_0.05": float(np.mean(p < 0.05)), "n": len(p),
                              "median_p": float(np.median(p))}
        print(f"masked {ratio:.0%}: {np.mean(p < 0.05):.1%} with p < 0.05 (n={len(p)})", file=sys.stderr)
    from engine.sweeps import provenance

    meta = classifier.meta
    command = "python scripts/experiments/lora_masf.py " + " ".join(argv if argv is not None else sys.argv[1:])
    # The one provenance record (command, code version, time, machine, runtime, weights), then this script's figures.
    result = {**provenance(command, start, checkpoint_sha256=meta.weights_sha256),
              "model": classifier.id, "weights_sha256": meta.weights_sha256,
              "replacement": meta.replacement, "calibration_strategy": strategy,
              "calibration": f"{args.dataset} validation, first {len(calibration)}", "test_sample": len(test),
              "seed": args.seed, "shares": shares, "threads": torch.get_num_threads(),
              "seconds": round(time.time() - start, 1)}
    return print_and_write(result, args.out)


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    raise SystemExit(main())

"""Is a classifier fine-tuned elsewhere measurable by masking, before and after masked fine-tuning here?

For each model (a registered id, a folder or a checkpoint): unmasked and 100%-masked accuracy on rt's test split,
and the share of test inputs that MaSF (fitted on rt's validation split transformed like the model's training:
plain for a model fine-tuned elsewhere) flags as out of distribution (p < 0.05) when 0%, 30% and 60% of their
tokens are replaced by the model's replacement token ([MASK]) at random (seeded).

    python bench/own_model.py --models minilm-rt-elsewhere minilm-rt-elsewhere-masked
    python bench/own_model.py --smoke      # CI: a toy checkpoint, 40 inputs
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
from _smoke import SMOKE_HELP, smoke_checkpoint, use_scratch_folders

from engine.data import get_dataset
from engine.models import load_classifier, mask_random_fraction
from engine.ood import calibration_strategy, fit_masf, hidden_state_features
from engine.runtime import code_version, configure


def pvalue_share(classifier, masf, examples, ratio: float, seed: int = 99) -> float:
    generator = torch.Generator().manual_seed(seed)
    p = []
    for start in range(0, len(examples), 64):
        batch = classifier.batch_of(examples[start:start + 64]).to("cpu")
        batch = mask_random_fraction(batch, ratio, classifier.mask_token_id, generator)
        p.append(masf.pvalues(hidden_state_features(classifier, batch.to(classifier.device))))
    return float(np.mean(np.concatenate(p) < 0.05))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=None, help="checkpoint ids or folders (required but with --smoke)")
    ap.add_argument("--dataset", default="rt")
    ap.add_argument("--limit", type=int, default=None, help="only the first N validation and test inputs (smoke runs)")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = ap.parse_args()
    if args.smoke:
        use_scratch_folders()
        args.models, args.dataset, args.limit = [smoke_checkpoint()], "toy", 40  # MaSF needs 30+
    if not args.models:
        ap.error("--models is required")
    configure()
    dataset = get_dataset(args.dataset)
    test = dataset.split("test")[:args.limit]
    print(f"code {code_version()} · {args.dataset} test split, n = {len(test)} · torch threads {torch.get_num_threads()}\n")
    print("| model | strategy | masked-fine-tuned | unmasked accuracy | 100%-masked accuracy | MaSF p < 0.05: 0% masked "
          "| 30% masked | 60% masked | weights sha256 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model_id in args.models:
        classifier = load_classifier(model_id)
        unmasked = classifier.evaluate(dataset, "test", limit=args.limit)
        masked = classifier.evaluate(dataset, "test", mask_all=True, limit=args.limit)
        masf = fit_masf(classifier, dataset=args.dataset, save=False, limit=args.limit)
        shares = [pvalue_share(classifier, masf, test, r) for r in (0.0, 0.3, 0.6)]
        digest = classifier.weights_sha256
        print(f"| {model_id} | {classifier.metadata.get('strategy')} (MaSF calibrated {calibration_strategy(classifier)}) | "
              f"{'yes' if classifier.masked_fine_tuned else 'no'} | {unmasked['accuracy']:.3f} | {masked['accuracy']:.3f} | "
              f"{shares[0]:.1%} | {shares[1]:.1%} | {shares[2]:.1%} | {digest[:12]} |", flush=True)
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    raise SystemExit(main())

"""`python -m engine masf`: fit a checkpoint's MaSF in-distribution test and store it beside it."""
from __future__ import annotations

import argparse

HELP = "fit the MaSF in-distribution test of a checkpoint and store it beside it"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Fit MaSF (docs/masf.md) on the validation split of a dataset transformed like the checkpoint's "
                          "training, store it beside the checkpoint keyed by what calibrated it (dataset, split seed, "
                          "masking scheme and token, fitting code version: a look-up for other data fits anew), and "
                          "report the share of p-values below 0.05 on the test split unmasked and 100% masked.\n\n"
                          "Examples:\n"
                          "  python -m engine masf --model tiny-rt-masked-s0\n"
                          "  python -m engine masf --model my-bert --dataset my-reviews --limit 500   # a registered model")

    parser.add_argument("--model", required=True, help="checkpoint id in models_cache, registered id or folder (see `python -m engine models`)")
    parser.add_argument("--dataset", default=None, help="dataset to calibrate on (default: the checkpoint's; required "
                        "for a model fine-tuned elsewhere)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N validation inputs (stored as a "
                        "calibration of its own: other commands look up the fit on the whole split)")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from engine.cli.arguments import FitProgress
    from engine.data import get_dataset
    from engine.models import load_classifier, mask_all_primary
    from engine.ood import fit_masf, hidden_state_features

    classifier = load_classifier(args.model)
    with FitProgress("fitting MaSF") as progress:
        masf = fit_masf(classifier, limit=args.limit, dataset=args.dataset, progress=progress)
    key = masf.provenance["key"]
    print(f"MaSF calibrated on {masf.provenance['calibration']}")
    test = get_dataset(key["dataset"], key["split_seed"]).split("test")[:500]
    for label, full in (("unmasked", False), ("100% masked", True)):
        p, low, high = [], [], []
        for start in range(0, len(test), 64):
            batch = classifier.batch_of(test[start : start + 64])
            if full:
                batch = mask_all_primary(batch, classifier.mask_token_id)
            for out, values in zip((p, low, high), masf.pvalue_ranges(hidden_state_features(classifier, batch))):
                out.append(values)
        p, low, high = (np.concatenate(v) for v in (p, low, high))
        # the calibration's own uncertainty beside the verdicts: inputs whose folds fall on both sides of 0.05
        print(f"{label:12} test inputs: {np.mean(p < 0.05):6.1%} with p < 0.05 (n={len(p)}; the folds disagree on "
              f"{np.mean((low < 0.05) != (high < 0.05)):.1%})")
    if classifier.artifacts_dir is not None:
        print(f"stored {classifier.artifacts_dir / ('masf-' + masf.provenance['digest'] + '.safetensors')}")
    return 0

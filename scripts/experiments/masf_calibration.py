"""False alarms of MaSF on fresh masked fine-tunings, with every source of variance (docs/masf.md, the
`masf-false-alarms` table).

For each checkpoint (a masked fine-tuning of a training seed nobody chose anything on), a grid of cells: for each of
`--draws` masking draws, the calibration inputs (the whole validation split) and the test split are masked like
training afresh; for each of `--divisions` divisions of that draw, the calibration inputs are cut into folds afresh
and MaSF is fitted, the 5-fold cross-fit (fit version 4, what the tool fits) and, beside it, one split into three
parts (fit version 3). Every cell's seeds are a function of (training seed, draw, division)
(`engine.results.masf_calibration.cell_seeds`), so no two checkpoints share a draw or a division. Each cell records
which test inputs got p < 0.05 (false alarms: they are drawn like the calibration inputs), the share among the
completely masked test inputs (what MaSF should flag) and the share of verdicts on which the folds disagree.

One JSON per checkpoint under results/masf-calibration/<run>/, with provenance; resumable (a checkpoint already there
is skipped). `python -m engine docs-tables --tables masf-false-alarms` prints the table and the interval.

    export ENGINE_THREADS=1 OMP_NUM_THREADS=1 ENGINE_MODELS_CACHE=/tmp/masf_seeds/models
    for s in $(seq 21 32); do
      python -m engine train --model tiny --dataset rt --strategy masked --seed $s --id tiny-rt-masked-s$s --quiet
      python scripts/experiments/masf_calibration.py --models tiny-rt-masked-s$s --run tiny-rt-seeds-21-up --draws 4 --divisions 4
    done
    python scripts/experiments/masf_calibration.py --smoke     # CI: the toy smoke checkpoint, 2 x 2 cells, in a scratch folder
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from engine.atomic import write_text
from engine.data import get_dataset
from engine.models import load_classifier, training_transform
from engine.models.batch import SPECIAL
from engine.ood import calibration_features, calibration_strategy, hidden_state_features
from engine.ood.masf import CrossFitMaSF, MaSF
from engine.results.masf_calibration import ALPHA, FOLDS, cell_seeds, report_table, run_folder
from engine.runtime import code_version, configure
from engine.smoke import SMOKE_HELP, smoke_checkpoint, use_scratch_folders
from engine.sweeps.provenance import provenance


def test_features(classifier, seed: int) -> tuple[torch.Tensor, np.ndarray]:
    """(features [M, L, H], share of each input's maskable tokens masked [M]) of the test split masked like training
    with masking seed `seed`."""
    meta = classifier.metadata
    test = get_dataset(meta["dataset"], meta.get("split_seed", 0)).split("test")
    g = torch.Generator().manual_seed(seed)
    feats, shares = [], []
    for start in range(0, len(test), 64):
        batch = training_transform(classifier.batch_of(test[start : start + 64]).to("cpu"), meta["strategy"],
                                   classifier.mask_token_id, g)
        real = (batch.segments != SPECIAL) & (batch.attention_mask == 1)
        masked = ((batch.input_ids == classifier.mask_token_id) & real).sum(1).double()
        shares.append((masked / real.sum(1).clamp(min=1)).numpy())
        feats.append(hidden_state_features(classifier, batch.to(classifier.device)))
    return torch.cat(feats), np.concatenate(shares)


def measure(model_id: str, command: str, draws: int, divisions: int) -> dict:
    started = time.time()
    classifier = load_classifier(model_id)
    meta = classifier.metadata
    training_seed = int(classifier.meta.seed or 0)
    data = get_dataset(meta["dataset"], meta.get("split_seed", 0))
    strategy = calibration_strategy(classifier)
    cells = []
    progress = tqdm(total=draws * divisions, desc=model_id, file=sys.stderr)
    for m in range(draws):
        seeds = cell_seeds(training_seed, m, 0)
        cal = calibration_features(classifier, data.split("validation"), strategy, seed=seeds["calibration_mask_seed"])
        feats, share = test_features(classifier, seeds["test_mask_seed"])
        all_masked = share >= 1
        for d in range(divisions):
            seeds = cell_seeds(training_seed, m, d)
            after = CrossFitMaSF(FOLDS, seed=seeds["fold_seed"]).fit(cal)
            p, low, high = after.pvalue_ranges(feats)
            before = MaSF(seed=seeds["fold_seed"]).fit(cal)
            q = before.pvalues(feats)
            cells.append({"draw": m, "division": d, **seeds, "n_all_masked": int(all_masked.sum()),
                          "after": {"share": float(np.mean(p < ALPHA)), "flagged": np.flatnonzero(p < ALPHA).tolist(),
                                    "share_all_masked": float(np.mean(p[all_masked] < ALPHA)) if all_masked.any() else None,
                                    "folds_disagree": float(np.mean((low < ALPHA) != (high < ALPHA))),
                                    "n_level3": int(after.n_level3)},
                          "before": {"share": float(np.mean(q < ALPHA)),
                                     "share_all_masked": float(np.mean(q[all_masked] < ALPHA)) if all_masked.any() else None,
                                     "n_level3": int(before.level3.shape[0])}})
            progress.update()
    progress.close()
    return {"model": model_id, "training_seed": training_seed, "dataset": meta["dataset"],
            "split_seed": meta.get("split_seed", 0), "n_test": int(feats.shape[0]), "n_calibration": int(cal.shape[0]),
            "epochs": meta.get("config", {}).get("epochs"), "alpha": ALPHA, "folds": FOLDS, "draws": draws,
            "divisions": divisions, "calibration_strategy": strategy, "cells": cells,
            "provenance": provenance(command, started, classifier, n_examples=int(feats.shape[0]),
                                     calibration=f"{meta['dataset']} validation split (split seed {meta.get('split_seed', 0)}), "
                                                 f"all {int(cal.shape[0])} inputs, masked like training ({strategy})")}


def dumps(record: dict) -> str:
    """The record as JSON, one line per cell (a cell's list of flagged test inputs would otherwise take a line each)."""
    head = {k: v for k, v in record.items() if k != "cells"}
    cells = ",\n".join("  " + json.dumps(c) for c in record["cells"])
    return json.dumps(head, indent=1)[:-2] + ',\n "cells": [\n' + cells + "\n ]\n}\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", help="masked fine-tunings (checkpoint ids)")
    ap.add_argument("--run", help="run name: results/masf-calibration/<run>/")
    ap.add_argument("--draws", type=int, default=5, help="masking draws per checkpoint (default 5)")
    ap.add_argument("--divisions", type=int, default=5, help="calibration divisions per draw (default 5)")
    ap.add_argument("--results-dir", default=None, help="results root (default: the project's results/)")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = ap.parse_args()
    configure()
    if args.smoke:  # CI: the toy smoke checkpoint, 2 x 2 cells, the table printed from the scratch results
        root = use_scratch_folders()
        model = smoke_checkpoint("toy")
        args.models, args.run, args.results_dir, args.draws, args.divisions = [model], "smoke", str(root / "results"), 2, 2
    elif not args.models or not args.run:
        ap.error("--models and --run are needed (or --smoke)")
    version = code_version()  # fixed now: the code this process imported
    command = "python scripts/experiments/masf_calibration.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    folder = run_folder(args.run, args.results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for model_id in args.models:
        path = folder / f"{model_id}.json"
        if path.is_file():
            print(f"{model_id}: already measured ({path})")
            continue
        record = measure(model_id, command, args.draws, args.divisions)
        assert record["provenance"]["code_version"] == version
        write_text(path, dumps(record))
        after = [c["after"]["share"] for c in record["cells"]]
        print(f"{model_id}: p < {ALPHA:g} on {np.mean(after):.2%} of the test inputs over {len(after)} cells "
              f"({record['provenance']['seconds']:.0f} s)")
    if args.smoke:
        print(report_table(args.run)(Path(args.results_dir)))
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    raise SystemExit(main())

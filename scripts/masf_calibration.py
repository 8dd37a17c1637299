"""False alarms of MaSF on fresh masked fine-tunings, before and after cross-fitting (issue 35 item 7; docs/masf.md).

For each checkpoint (a masked fine-tuning nobody tuned MaSF on): calibration features of its whole validation split
masked like training (mask seed 1234, as the tool fits), and the test split masked like training (mask seed 99). The
share of test inputs with p < 0.05 (the false-alarm rate: they are drawn like the calibration inputs), over ten
divisions of the calibration inputs:

  before: one split into three parts (fit version 3, `MaSF(seed=s)`), parts seeds 0-9 (0: as the tool fitted);
  after:  the 5-fold cross-fit (fit version 4, `CrossFitMaSF(5, seed=s)`), fold seeds 0-9 (0: as the tool fits).

Also the share among completely masked test inputs (what MaSF should flag) and the share of verdicts on which the
folds disagree. One JSON per checkpoint under results/masf-calibration/<run>/, with provenance; resumable (a
checkpoint already there is skipped). `python -m engine report --tables masf-false-alarms` prints the table.

    export ENGINE_THREADS=1 ENGINE_MODELS_CACHE=/tmp/eh_masf/models
    for s in 6 7 8 9 10; do
      python -m engine train --model tiny --dataset rt --strategy masked --seed $s --id tiny-rt-masked-s$s --quiet
    done
    python scripts/masf_calibration.py --models tiny-rt-masked-s6 tiny-rt-masked-s7 tiny-rt-masked-s8 \\
        tiny-rt-masked-s9 tiny-rt-masked-s10 --run tiny-rt-fresh-seeds
    python scripts/masf_calibration.py --smoke     # CI: the toy smoke checkpoint, two divisions, in a scratch folder
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
from engine.ood import DEFAULT_MASK_SEED, calibration_features, calibration_strategy, hidden_state_features
from engine.ood.masf import CrossFitMaSF, MaSF
from engine.results.masf_calibration import ALPHA, DIVISIONS, FOLDS, report_table, run_folder
from engine.runtime import code_version, configure
from engine.smoke import SMOKE_HELP, smoke_checkpoint, use_scratch_folders
from engine.sweeps.provenance import provenance

TEST_MASK_SEED = 99


def test_features(classifier) -> tuple[torch.Tensor, np.ndarray]:
    """(features [M, L, H], share of each input's maskable tokens masked [M]) of the test split masked like training."""
    meta = classifier.metadata
    test = get_dataset(meta["dataset"], meta.get("split_seed", 0)).split("test")
    g = torch.Generator().manual_seed(TEST_MASK_SEED)
    feats, shares = [], []
    for start in range(0, len(test), 64):
        batch = training_transform(classifier.batch_of(test[start : start + 64]).to("cpu"), meta["strategy"],
                                   classifier.mask_token_id, g)
        real = (batch.segments != SPECIAL) & (batch.attention_mask == 1)
        masked = ((batch.input_ids == classifier.mask_token_id) & real).sum(1).double()
        shares.append((masked / real.sum(1).clamp(min=1)).numpy())
        feats.append(hidden_state_features(classifier, batch.to(classifier.device)))
    return torch.cat(feats), np.concatenate(shares)


def measure(model_id: str, command: str, divisions: int = DIVISIONS) -> dict:
    started = time.time()
    classifier = load_classifier(model_id)
    meta = classifier.metadata
    data = get_dataset(meta["dataset"], meta.get("split_seed", 0))
    cal = calibration_features(classifier, data.split("validation"), calibration_strategy(classifier), seed=DEFAULT_MASK_SEED)
    feats, share = test_features(classifier)
    all_masked = share >= 1
    rows = {"before": [], "after": []}
    disagree = None
    for seed in tqdm(range(divisions), desc=model_id, file=sys.stderr):
        for name, masf in (("before", MaSF(seed=seed)), ("after", CrossFitMaSF(FOLDS, seed=seed))):
            masf.fit(cal)
            if name == "after":
                p, low, high = masf.pvalue_ranges(feats)
                if seed == 0:
                    disagree = float(np.mean((low < ALPHA) != (high < ALPHA)))
            else:
                p = masf.pvalues(feats)
            rows[name].append({"seed": seed, "share": float(np.mean(p < ALPHA)),
                               "share_all_masked": float(np.mean(p[all_masked] < ALPHA)),
                               "n_level3": int(masf.n_level3 if name == "after" else masf.level3.shape[0])})
    return {"model": model_id, "n_test": int(len(share)), "n_calibration": int(cal.shape[0]),
            "n_all_masked": int(all_masked.sum()), "epochs": meta.get("config", {}).get("epochs"),
            "alpha": ALPHA, "folds": FOLDS, "folds_disagree_share": disagree, **rows,
            "provenance": provenance(command, started, classifier, n_examples=int(len(share)),
                                     test_mask_seed=TEST_MASK_SEED, calibration_mask_seed=DEFAULT_MASK_SEED)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", help="masked fine-tunings (checkpoint ids)")
    ap.add_argument("--run", help="run name: results/masf-calibration/<run>/")
    ap.add_argument("--results-dir", default=None, help="results root (default: the project's results/)")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = ap.parse_args()
    configure()
    divisions = DIVISIONS
    if args.smoke:  # CI: the toy smoke checkpoint, two divisions, the table printed from the scratch results
        root = use_scratch_folders()
        args.models, args.run, args.results_dir, divisions = [smoke_checkpoint("toy")], "smoke", str(root / "results"), 2
    elif not args.models or not args.run:
        ap.error("--models and --run are needed (or --smoke)")
    version = code_version()  # fixed now: the code this process imported
    command = "python scripts/masf_calibration.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    folder = run_folder(args.run, args.results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for model_id in args.models:
        path = folder / f"{model_id}.json"
        if path.is_file():
            print(f"{model_id}: already measured ({path})")
            continue
        record = measure(model_id, command, divisions)
        assert record["provenance"]["code_version"] == version
        write_text(path, json.dumps(record, indent=2))
        print(f"{model_id}: before {record['before'][0]['share']:.2%}, after {record['after'][0]['share']:.2%}")
    if args.smoke:
        print(report_table(args.run)(Path(args.results_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m engine datasets`: list the datasets with their splits, metric and class-majority baseline."""
from __future__ import annotations

import argparse

HELP = "list the datasets with their splits, metric and class-majority baseline"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = ("List the registered datasets (all offline: packaged CSV or generated).")

    parser.add_argument("--split-seed", type=int, default=0, help="seed of the splits to describe. Default: 0")


def run(args: argparse.Namespace) -> int:
    from engine.data import DATASET_NAMES, get_dataset

    for name in DATASET_NAMES:
        s = get_dataset(name, args.split_seed).summary()
        sizes = "/".join(str(s["sizes"][k]) for k in ("train", "validation", "test"))
        print(f"{name:8} {s['metric']:9} classes={len(s['classes'])} train/val/test={sizes:16} "
              f"majority baseline {s['majority_baseline_test']:.3f}  {'paired' if s['paired'] else 'single'}  "
              f"max_length={s['max_length']}")
    return 0

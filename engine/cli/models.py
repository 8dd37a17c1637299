"""`python -m engine models`: list the checkpoints with their test metrics."""
from __future__ import annotations

import argparse
import json

HELP = "list the checkpoints in models_cache with their test metrics"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = ("List every checkpoint in models_cache: dataset, strategy, unmasked and "
                       "100%%-masked test metric, class-majority baseline. Broken folders are listed with the reason.")

    parser.add_argument("--json", action="store_true", help="print the full metadata as JSON")


def run(args: argparse.Namespace) -> int:
    from engine.models import list_checkpoints, models_cache_dir

    rows = list_checkpoints()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no checkpoints in {models_cache_dir()}; train one with `python -m engine train --model tiny --dataset rt`")
        return 0
    print(f"{'id':34} {'dataset':8} {'strategy':12} {'metric':9} {'unmasked':>8} {'100%mask':>8} {'majority':>8} {'epoch':>5}")
    for m in rows:
        if "error" in m:
            print(f"{m['id']:34} BROKEN: {m['error']}")
            continue
        t = m.get("test", {})
        fmt = lambda v: f"{v:8.4f}" if isinstance(v, (int, float)) else f"{'-':>8}"  # noqa: E731
        print(f"{m['id']:34} {m['dataset']:8} {m['strategy']:12} {m.get('metric', '-'):9} {fmt(t.get('unmasked'))} "
              f"{fmt(t.get('masked_100'))} {fmt(t.get('majority_baseline'))} {m.get('best_epoch', '-')!s:>5}")
    return 0

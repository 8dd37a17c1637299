"""Masked vs plain fine-tuning (FMM Sec. 5.1 check) on this machine, written as a markdown table.

Trains (or reuses from models_cache) each (model, strategy) on a dataset with the same seed and
epochs and reports unmasked and 100%-masked test metric, the class-majority baseline, epoch time.

    python bench/masked_finetuning.py --dataset rt --runs tiny:masked tiny:plain tiny:only-masking
    python bench/masked_finetuning.py --dataset rt --runs minilm:masked --epochs 2 --lr 5e-5
    python bench/masked_finetuning.py --smoke     # CI: toy data, 1 epoch, a scratch models cache
"""
from __future__ import annotations

import argparse
import json
import platform

from _smoke import SMOKE_HELP, use_scratch_folders  # noqa: E402

from engine.models import TrainConfig, default_model_id, list_checkpoints, save_classifier, train_classifier  # noqa: E402
from engine.runtime import code_version  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="rt")
    ap.add_argument("--runs", nargs="+", default=["tiny:masked", "tiny:plain"], help="model:strategy pairs")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="append the JSON rows to this file")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = ap.parse_args()
    if args.smoke:
        use_scratch_folders()
        args.dataset, args.runs, args.epochs = "toy", ["tiny:masked", "tiny:plain"], 1

    existing = {m["id"]: m for m in list_checkpoints() if "error" not in m}
    rows = []
    for run in args.runs:
        model, strategy = run.split(":")
        config = TrainConfig(base_model=model, dataset=args.dataset, strategy=strategy, epochs=args.epochs, lr=args.lr, seed=args.seed)
        model_id = default_model_id(config)
        meta = existing.get(model_id)
        if meta is None or meta["config"]["epochs"] != args.epochs or meta["config"]["lr"] != args.lr:
            classifier = train_classifier(config)
            save_classifier(classifier, model_id, overwrite=True)
            meta = classifier.metadata
        t = meta["test"]
        rows.append({
            "id": model_id, "model": model, "strategy": strategy, "dataset": args.dataset, "epochs": args.epochs,
            "lr": args.lr, "seed": args.seed, "unmasked": t["unmasked"], "masked_100": t["masked_100"],
            "masked_100_accuracy_ci95": t["masked_100_accuracy_ci95"], "majority_baseline": t["majority_baseline"],
            "best_epoch": meta["best_epoch"], "train_seconds": meta["train_seconds"],
            "seconds_per_epoch": round(meta["train_seconds"] / args.epochs, 1), "code_version": meta["code_version"],
            "machine": f"{platform.machine()} {meta.get('torch_threads')} threads {meta.get('device')}",
        })
    print(f"\n| model | strategy | test {rows[0]['dataset']} unmasked | 100% masked (95% CI) | majority | best epoch | s/epoch |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        lo, hi = r["masked_100_accuracy_ci95"]
        print(f"| {r['model']} | {r['strategy']} | {r['unmasked']:.4f} | {r['masked_100']:.4f} ({lo:.3f}-{hi:.3f}) | "
              f"{r['majority_baseline']:.4f} | {r['best_epoch']} | {r['seconds_per_epoch']} |")
    print(f"code {code_version()}")
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    main()

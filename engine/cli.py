"""`python -m engine ...`: train models, list models and datasets. Every error a user can cause
(unknown names, broken checkpoints, bad options) ends in one clear line on stderr and exit code 2,
with nothing written."""
from __future__ import annotations

import argparse
import json
import sys
import textwrap

DESCRIPTION = """\
Faithfulness engine: fine-tune classifiers that support masking, and measure whether token-importance
explanations are true to the model. Models are stored in models_cache/ (ENGINE_MODELS_CACHE overrides).
Run `python -m engine COMMAND --help` for each command."""


def _add_train(sub) -> None:
    p = sub.add_parser(
        "train",
        help="fine-tune a classifier (masked fine-tuning by default) and save it to models_cache",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Fine-tune a pretrained encoder on a dataset and save the best epoch to models_cache/<id>/
            (safetensors weights, tokenizer, metadata.json with every hyper-parameter and test metric).

            Strategies (FMM, Madsen et al. 2024):
              masked        half of each mini-batch is masked with a ratio r ~ U(0,1) per input, so the model
                            learns to read [MASK] as "information removed": explanations can then be checked by
                            masking without leaving the training distribution (the default; use this).
              plain         ordinary fine-tuning (ablation): its masked inputs are out of distribution.
              only-masking  every input masked with r ~ U(0,1) (ablation).

            Examples:
              python -m engine train --model tiny --dataset rt                 # ~80 s on 2 CPU cores
              python -m engine train --model minilm --dataset rt --epochs 2 --lr 5e-5
              python -m engine train --model tiny --dataset babi-1 --strategy plain --seed 3
            """),
    )
    p.add_argument("--model", default="tiny", help="encoder to start from: 'tiny' (BERT 2x128, 4.4M params), "
                   "'minilm' (MiniLM-L6, 22.7M), a local Hugging Face folder, or a hub id (needs a network). Default: tiny")
    p.add_argument("--dataset", default="rt", help="rt, imdb, babi-1, babi-2, babi-3 or toy (see `python -m engine datasets`). Default: rt")
    p.add_argument("--strategy", default="masked", choices=["masked", "plain", "only-masking"], help="fine-tuning strategy (see above). Default: masked")
    p.add_argument("--epochs", type=int, default=4, help="training epochs; the best on validation is kept. Default: 4")
    p.add_argument("--lr", type=float, default=1e-4, help="peak learning rate of AdamW (linear decay, 6%% warm-up). "
                   "1e-4 suits tiny; use 2e-5..5e-5 for larger models. Default: 1e-4")
    p.add_argument("--batch-size", type=int, default=32, help="mini-batch size. Default: 32")
    p.add_argument("--max-length", type=int, default=None, help="tokens per input; longer inputs are truncated "
                   "(and flagged). Default: the dataset's (rt 64, imdb 256, bAbI 160-192)")
    p.add_argument("--seed", type=int, default=0, help="seed of initialisation, batch order and masking. Default: 0")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the train/validation/test split. Default: 0")
    p.add_argument("--train-limit", type=int, default=None, help="use only the first N training examples (quick trials)")
    p.add_argument("--eval-limit", type=int, default=None, help="use only the first N validation and test examples (quick trials)")
    p.add_argument("--device", default="auto", help="auto (cuda when available), cpu or cuda. Default: auto")
    p.add_argument("--id", default=None, help="checkpoint id (folder name in models_cache). Default: <model>-<dataset>-<strategy>-s<seed>")
    p.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint with the same id")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_models(sub) -> None:
    p = sub.add_parser("models", help="list the checkpoints in models_cache with their test metrics",
                       description="List every checkpoint in models_cache: dataset, strategy, unmasked and "
                       "100%%-masked test metric, class-majority baseline. Broken folders are listed with the reason.")
    p.add_argument("--json", action="store_true", help="print the full metadata as JSON")


def _add_datasets(sub) -> None:
    p = sub.add_parser("datasets", help="list the datasets with their splits, metric and class-majority baseline",
                       description="List the registered datasets (all offline: packaged CSV or generated).")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the splits to describe. Default: 0")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_train(sub)
    _add_models(sub)
    _add_datasets(sub)
    return parser


def cmd_train(args) -> int:
    from engine.data import get_dataset
    from engine.models import TrainConfig, checkpoint, default_model_id, resolve_encoder, save_classifier, train_classifier

    config = TrainConfig(
        base_model=args.model, dataset=args.dataset, strategy=args.strategy, epochs=args.epochs, lr=args.lr,
        batch_size=args.batch_size, max_length=args.max_length, seed=args.seed, split_seed=args.split_seed,
        train_limit=args.train_limit, eval_limit=args.eval_limit, device=args.device,
    )
    model_id = checkpoint.check_model_id(args.id or default_model_id(config))
    target = checkpoint.models_cache_dir() / model_id
    # Check everything that can be checked before spending minutes on training.
    if target.exists() and not args.overwrite:
        raise FileExistsError(f"checkpoint {model_id!r} exists at {target}; pass --overwrite or choose another --id")
    get_dataset(args.dataset, args.split_seed)
    resolve_encoder(args.model)
    classifier = train_classifier(config, show_progress_bar=not args.quiet)
    folder = save_classifier(classifier, model_id, overwrite=args.overwrite)
    t = classifier.metadata["test"]
    print(f"saved {folder}")
    print(f"test {classifier.metadata['metric']}: unmasked {t['unmasked']:.4f}, 100% masked {t['masked_100']:.4f} "
          f"(accuracy {t['masked_100_accuracy']:.4f}, 95% CI {t['masked_100_accuracy_ci95'][0]:.4f}-"
          f"{t['masked_100_accuracy_ci95'][1]:.4f}), class-majority baseline {t['majority_baseline']:.4f}; "
          f"best epoch {classifier.metadata['best_epoch']}, {classifier.metadata['train_seconds']:.0f} s")
    return 0


def cmd_models(args) -> int:
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


def cmd_datasets(args) -> int:
    from engine.data import DATASET_NAMES, get_dataset

    for name in DATASET_NAMES:
        s = get_dataset(name, args.split_seed).summary()
        sizes = "/".join(str(s["sizes"][k]) for k in ("train", "validation", "test"))
        print(f"{name:8} {s['metric']:9} classes={len(s['classes'])} train/val/test={sizes:16} "
              f"majority baseline {s['majority_baseline_test']:.3f}  {'paired' if s['paired'] else 'single'}  "
              f"max_length={s['max_length']}")
    return 0


COMMANDS = {"train": cmd_train, "models": cmd_models, "datasets": cmd_datasets}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    from engine.data import UnknownDatasetError
    from engine.models import CheckpointError, EmptyInputError, LabelMismatchError, UnknownModelError, TrainingCancelled

    user_errors = (UnknownDatasetError, UnknownModelError, CheckpointError, LabelMismatchError, EmptyInputError,
                   FileExistsError, ValueError)
    try:
        return COMMANDS[args.command](args)
    except user_errors as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, TrainingCancelled):
        print("interrupted: nothing was saved", file=sys.stderr)
        return 130

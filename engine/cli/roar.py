"""`python -m engine roar`: ROAR and Recursive ROAR with retraining, into the results store."""
from __future__ import annotations

import argparse
import textwrap

from engine.cli.arguments import add_sweep_arguments, print_area_table, ratios
from engine.cli.sweep_report import print_sweep_report
from engine.models.metadata import STRATEGIES

HELP = "ROAR / Recursive ROAR with retraining: one curve per measure, seed and method (resumable)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
            Mask the tokens a measure ranks highest in the train, validation and test splits and retrain a
            fresh model at each level (R-ROAR, Madsen et al. 2022). `recursive-roar`: the model retrained at
            the previous level explains the already-masked data; `roar` (Hooker et al. 2019): the level-0
            model's ranking is used for every level. The level-0 model of each seed is trained once and saved
            in models_cache (or reused when one with the same config is there). Writes tidy rows with
            provenance to results/<run>/; cells already there are skipped. With --workers or --ray the curves
            are computed in parallel (the same numbers). Include `random`: RACU compares
            against it. Cost: one training per level, measure, method and seed (see the README for timings).

            Example (R-ROAR appendix C.1 BiLSTM-attention on rt, 3 seeds):
              python -m engine roar --model bilstm --dataset rt --strategy plain --measures random attention grad-l2 \\
                  --seeds 0 1 2 --epochs 4 --lr 1e-3 --run bilstm-rt-roar
            """)

    parser.add_argument("--model", default="bilstm", help="encoder: bilstm (default), tiny, minilm or a local folder")
    parser.add_argument("--dataset", default="rt", help="dataset (see `python -m engine datasets`). Default: rt")
    parser.add_argument("--strategy", default="plain", choices=STRATEGIES,
                   help="fine-tuning strategy of every model. Default: plain (as in R-ROAR)")
    parser.add_argument("--measures", nargs="+", required=True, help="importance measures; include random")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds (one level-0 model each). Default: 0")
    parser.add_argument("--methods", nargs="+", default=["recursive-roar", "roar"], choices=["recursive-roar", "roar"],
                   help="which curves. Default: both")
    parser.add_argument("--levels", default="quantile", choices=["quantile", "count"],
                   help="quantile: 10%%..90%% of each input's maskable tokens; count: 1..10 tokens. Default: quantile")
    parser.add_argument("--steps", type=ratios, default=None, metavar="LEVELS",
                   help="comma-separated levels instead of the defaults (fractions for quantile, counts for count)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs of every training. Default: 4")
    parser.add_argument("--lr", type=float, default=None, help="learning rate. Default: 1e-3 for bilstm, else the train default")
    parser.add_argument("--batch-size", type=int, default=32, help="mini-batch size. Default: 32")
    parser.add_argument("--train-limit", type=int, default=None, help="only the first N training examples (quick trials)")
    parser.add_argument("--eval-limit", type=int, default=None, help="only the first N validation and test examples")
    parser.add_argument("--run", default="roar", help="results/<run>/. Default: roar")
    add_sweep_arguments(parser)


def run(args: argparse.Namespace) -> int:

    from tqdm import tqdm

    from engine.data import get_dataset
    from engine.faithfulness.retraining import run_retraining_sweep
    from engine.models import TrainConfig, resolve_encoder
    from engine.models.loading import check_weights
    from engine.models.training import default_learning_rate

    # Refuse what can be refused before the sweep starts, as `train` does: an unknown dataset, an unknown model, or a
    # folder whose weights are only pickled (it would otherwise fail inside every cell, "0 curves computed, 1 failed").
    get_dataset(args.dataset)
    check_weights(resolve_encoder(args.model))
    lr = args.lr or default_learning_rate(args.model)
    config = TrainConfig(base_model=args.model, dataset=args.dataset, strategy=args.strategy, epochs=args.epochs, lr=lr,
                         batch_size=args.batch_size, train_limit=args.train_limit, eval_limit=args.eval_limit)
    levels = None
    if args.steps:
        levels = [x for x in args.steps if x > 0]
        if args.levels == "count":
            levels = [int(x) for x in levels]
    bar = tqdm(desc="trainings", unit="model")

    def progress(info):
        bar.total = info["trainings_total"]
        bar.n = info["trainings_done"]
        bar.set_postfix_str(f"{info['measure']} seed {info['seed']}")
        bar.refresh()

    report = run_retraining_sweep(config, args.measures, args.seeds, methods=args.methods, strategy=args.levels,
                                  levels=levels, run=args.run, log=lambda m: tqdm.write(f"== {m}"), progress=progress,
                                  command=args.command_line, workers=args.workers, ray=args.ray)
    bar.close()
    print_sweep_report(report, "curves")
    print_area_table(args.run)
    return 1 if report.failed else 0

"""`python -m engine sanity`: model and label randomisation checks of importance measures (Adebayo et al. 2018) and
the random-logit test (Sixt et al. 2020)."""
from __future__ import annotations

import argparse
import sys
import textwrap

from engine.cli.arguments import add_run_argument, add_sweep_arguments, sweep_backend

HELP = "sanity checks: cascading model randomisation, label randomisation and random logit, per measure"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
        Does a measure explain the model or only the input? Cascading model randomisation re-initialises the head,
        then the layers top-down, then the embeddings of a copy of the model; label randomisation fine-tunes the
        same encoder with the checkpoint's hyper-parameters on permuted labels (trained once and kept in
        models_cache as <model>-labels-permuted-p<seed>). After each stage the Spearman correlation of each
        measure's scores with those on the trained model is averaged over the inputs (gold label explained);
        after full randomisation it comes with a 95% BCa CI. Pass rule (ours): the CI's upper end below 0.5.
        One cell per (model, check, measure, seed) in <results>/evaluation/<run>/, resumable; --workers / --ray
        compute the cells in parallel, with the same numbers (a label-randomised twin is trained once, by the
        first cell that needs it). The random-logit test (--checks logit) explains each input for a random other
        class on the same model and compares with the explanation of its own class the same way; lower is better
        there too (a two-class model's signed measures give about -1, their absolute values +1).""")
    parser.epilog = textwrap.dedent("""\
        examples:
          python -m engine sanity --model tiny-rt-masked-s0 --dataset rt --measures random grad-l2 ig-sign --limit 100
          python -m engine sanity --model tiny-rt-masked-s0 --dataset rt --measures x-grad-sign --checks labels
          python -m engine sanity --model tiny-rt-masked-s0 --dataset rt --measures ig-sign ig-abs --checks logit""")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--model", required=True, help="checkpoint id in models_cache ('{seed}' is replaced by each seed)")
    parser.add_argument("--dataset", required=True, help="dataset the checkpoint was trained on")
    parser.add_argument("--measures", nargs="+", required=True, help="importance measures")
    parser.add_argument("--checks", nargs="+", default=["model", "labels"], choices=["model", "labels", "logit"],
                        help="model: cascading randomisation; labels: label randomisation; logit: the random-logit "
                             "test (the same model explaining another class, Sixt et al. 2020). Default: model labels")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0],
                        help="seeds of the re-initialisation / label permutation (and of the checkpoint with "
                             "'{seed}'). Default: 0")
    parser.add_argument("--split", default="test", help="dataset split. Default: test")
    parser.add_argument("--limit", type=int, default=100, help="first N examples of the split. Default: 100")
    add_run_argument(parser, "evaluation", default="sanity")
    add_sweep_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from engine.cli.sweep_report import print_sweep_report
    from engine.errors import InvalidInputError
    from engine.faithfulness.evaluation import SanityCell, evaluation_store, run_suite
    from engine.importance import MEASURES
    from engine.models import checkpoint
    from engine.sanity import sanity_summary  # noqa: F401 (import errors surface before any work)

    unknown = [m for m in args.measures if m not in MEASURES]
    if unknown:
        raise InvalidInputError(f"unknown measure(s) {', '.join(unknown)}; known: {', '.join(MEASURES)}")
    cells = []
    for seed in args.seeds:
        model_id = args.model.format(seed=seed)
        checkpoint.validate_model(model_id)
        for check in args.checks:
            for measure in args.measures:
                cells.append(SanityCell(model=model_id, dataset=args.dataset, measure=measure, seed=seed, check=check,
                                        split=args.split, limit=args.limit))
    command = getattr(args, "command_line", None) or "python -m engine sanity " + " ".join(sys.argv[1:])
    store = evaluation_store()
    with tqdm(total=len(cells), desc=f"sanity {args.run}", unit="cell") as bar:
        bar.update(sum(store.has_cell(args.run, c.key()) for c in cells))
        report = run_suite(cells, run=args.run, command=command, progress=lambda i, n, key: bar.update(1),
                           backend=sweep_backend(args))
    print_sweep_report(report, "cells", str(store.root / args.run))
    data = store.load(args.run)
    if not data.empty and "passes" in data.columns:
        final = data[data["passes"].notna()]
        for (method, measure), part in final.groupby(["method", "measure"]):
            print(f"  {method:<40} {measure:<14} Spearman after full randomisation {part['value'].mean():+.2f} "
                  f"[{part['ci_low'].mean():+.2f}, {part['ci_high'].mean():+.2f}]  "
                  f"{'pass' if part['passes'].all() else 'FAIL'}")
    return 1 if report.failed else 0

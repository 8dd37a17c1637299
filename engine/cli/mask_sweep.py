"""`python -m engine mask-sweep`: resumable recursive-masking sweeps into the results store."""
from __future__ import annotations

import argparse
import sys
import textwrap

from engine.cli.arguments import add_sweep_arguments, positive_int, print_area_table, ratios, sweep_backend

HELP = "sweep checkpoints x datasets x measures x seeds into the results store (resumable)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
            Run recursive-masking curves for every cell (checkpoint x dataset x measure x seed) and write tidy rows
            with provenance to results/<run>/ (ENGINE_RESULTS_DIR overrides). Cells already there are skipped, so
            an interrupted sweep resumes. Seeds pick checkpoints through --model-template (FMM: one fine-tuned model
            per seed) and seed the random baseline. Always include `random`: ACU/RACU compare against it, over the
            same examples, so one run can hold the whole split and a subset for an expensive measure (beam).

            Examples:
              python -m engine mask-sweep --datasets rt --measures random grad-l2 loo-sign --seeds 0 1 2 --limit 200
              python -m engine mask-sweep --datasets rt --measures random loo-sign beam --seeds 0 1 2 --limit 20   # same run
              python -m engine mask-sweep --datasets rt --measures random loo-sign --seeds 0 1 2 --counts 10 --run rt-counts
            """)

    parser.add_argument("--model-template", default="tiny-{dataset}-masked-s{seed}",
                   help="checkpoint id per (dataset, seed). Default: tiny-{dataset}-masked-s{seed}")
    parser.add_argument("--datasets", nargs="+", required=True)
    parser.add_argument("--measures", nargs="+", required=True)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0],
                   help="seeds (default 0). CIs are over seeds: one seed gives none; FMM used 5, at least 3 is usual")
    parser.add_argument("--run", default="default", help="name of the run folder in the results store (default: default)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int, default=None, help="only the first N examples of each split")
    schedule = parser.add_mutually_exclusive_group()
    schedule.add_argument("--ratios", type=ratios, default=None, help="comma-separated masking ratios (default 0,0.1,...,1)")
    schedule.add_argument("--counts", type=positive_int, default=None, metavar="N",
                          help="count mode: mask 0, 1, ..., N tokens per input (capped at its length) instead of ratios; "
                               "ACU then integrates over k / N")
    parser.add_argument("--whole-words", action="store_true",
                        help="mask whole words: ratios and counts count words, a word's pieces are masked together and it "
                             "ranks by the sum of its pieces' scores (random: one draw per word). Stored as its own "
                             "schedule ('ratio, whole words'), never pooled with token-level curves")
    parser.add_argument("--no-masf", action="store_true",
                        help="no MaSF p-values (skips its fit on the validation split, a forward of every input: for a "
                             "large LM on a CPU it can cost more than the curves); the curves and ACU/RACU are unchanged")
    add_sweep_arguments(parser)


def run(args: argparse.Namespace) -> int:

    from tqdm import tqdm

    from engine.faithfulness.benchmark import Cell, run_sweep
    from engine.models import checkpoint
    from engine.results import ResultsStore

    cells = []
    for dataset in args.datasets:
        for seed in args.seeds:
            model_id = args.model_template.format(dataset=dataset, seed=seed)
            checkpoint.validate_model(model_id)  # fail before any work
            for measure in args.measures:
                if args.counts is not None:
                    schedule = {"ratios": (), "counts": tuple(range(0, args.counts + 1))}
                else:
                    schedule = {"ratios": tuple(args.ratios) if args.ratios else Cell.ratios}
                cells.append(Cell(model=model_id, dataset=dataset, measure=measure, seed=seed, split=args.split,
                                  limit=args.limit, whole_words=args.whole_words, masf=not args.no_masf,
                                  **schedule))
    store = ResultsStore()
    with tqdm(total=len(cells), desc=f"mask-sweep {args.run}", unit="cell") as bar:
        bar.update(sum(store.has_cell(args.run, cell.key()) for cell in cells))  # a resumed sweep starts where it was
        def within(cell, done, total):  # one process: say how far the running cell is (a cell may take an hour)
            bar.set_postfix_str(f"{cell.measure} seed {cell.seed}: {done}/{total} examples")

        report = run_sweep(cells, run=args.run, backend=sweep_backend(args),
                           progress=lambda i, total, key: bar.update(1), cell_progress=within, command=args.command_line)
    print(f"{len(report.done)} cells computed, {len(report.skipped)} already in the store, {len(report.failed)} failed "
          f"-> {store.root / args.run}")
    for key, error in report.failed:
        print(f"  failed {key['model']} {key['measure']} seed {key['seed']}: {error}", file=sys.stderr)
    print_area_table(args.run)
    return 1 if report.failed else 0

"""`python -m engine rationales`: each measure's explanations against bAbI's supporting facts, stored per input."""
from __future__ import annotations

import argparse
import sys
import textwrap

from engine.cli.arguments import add_run_argument, add_split_arguments

HELP = "plausibility without annotators: AUPRC and token-F1 of each measure against bAbI's supporting facts"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
        bAbI's supporting facts are ground-truth rationales: each measure explains each input of the split (the gold
        label by default, as the faithfulness runs do) and its scores over the paragraph's tokens are compared with
        the supporting facts' tokens, per input:
          auprc     average precision of the scores ranking supporting-fact tokens first   (higher = more plausible)
          token-f1  token F1 of the top-k tokens, k the mean supporting-fact length         (higher = more plausible)
        One cell per (model, measure, seed) in <results>/rationales/<run>/ with a row per input (so intervals over
        inputs can be computed) and provenance; cells already there are skipped, so an interrupted run resumes.
        The Benchmarks page plots these against RACU and NAOPC (faithfulness against plausibility).""")
    parser.epilog = textwrap.dedent("""\
        example:
          python -m engine rationales --model tiny-babi-1-masked-s{seed} --dataset babi-1 --seeds 0 1 2 \\
              --measures random grad-l2 x-grad-sign ig-sign loo-sign --limit 100 --run tiny-babi1-rationales""")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--model", required=True,
                        help="checkpoint id in models_cache; '{seed}' in it is replaced by each seed")
    parser.add_argument("--dataset", required=True, help="a dataset with supporting facts (babi-1, babi-2, babi-3)")
    parser.add_argument("--measures", nargs="+", required=True, help="importance measures (e.g. grad-l2 ig-sign)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0],
                        help="seeds: of the checkpoint when --model has '{seed}', and of `random`. Default: 0")
    add_split_arguments(parser)
    parser.add_argument("--target", default="gold", choices=["gold", "predicted"],
                        help="the class explained: the gold label (default) or the model's prediction")
    parser.add_argument("--batch-size", type=int, default=16, help="inputs explained per batch. Default: 16")
    add_run_argument(parser, "rationales")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from engine.errors import InvalidInputError
    from engine.importance import MEASURES
    from engine.models import checkpoint
    from engine.plausibility.rationale_runs import RationaleCell, by_measure, load_rationales, run_rationales

    unknown = [m for m in args.measures if m not in MEASURES]
    if unknown:
        raise InvalidInputError(f"unknown measure(s) {', '.join(unknown)}; known: {', '.join(MEASURES)}")
    if args.limit is not None and args.limit < 1:
        raise InvalidInputError(f"--limit must be >= 1, got {args.limit}")
    cells = []
    for seed in args.seeds:
        model_id = args.model.format(seed=seed)
        checkpoint.validate_model(model_id)  # fail before any work
        cells += [RationaleCell(model=model_id, dataset=args.dataset, measure=m, seed=seed, split=args.split,
                                limit=args.limit, target=args.target) for m in args.measures]
    command = getattr(args, "command_line", None) or "python -m engine rationales " + " ".join(sys.argv[1:])
    with tqdm(total=len(cells), desc=f"rationales {args.run}", unit="cell") as bar:
        def within(cell, done, total):
            bar.set_postfix_str(f"{cell.model} {cell.measure}: {done}/{total} examples")

        done, skipped = run_rationales(cells, args.run, command, batch_size=args.batch_size, progress=within,
                                       cell_done=lambda cell: bar.update(1))
    print(f"{len(done)} cells computed, {len(skipped)} already in the store")
    rows = load_rationales(args.run)
    rows = rows[rows["model"].isin({c.model for c in cells}) & rows["measure"].isin(args.measures)]
    table = by_measure(rows)
    if not table.empty:
        print("AUPRC against the supporting facts (mean over inputs, 95% BCa CI over inputs):")
        for r in table.sort_values("value", ascending=False).itertuples():
            print(f"  {r.measure:14s} {r.value:.3f} [{r.low:.3f}, {r.high:.3f}]  n={r.n} inputs, {r.seeds} seed(s)")
    return 0

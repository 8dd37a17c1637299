"""`python -m engine annotations export|import|stats`: the annotation store from the command line."""
from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap

from engine.cli.arguments import annotation_database, database_options
from engine.errors import InvalidInputError

HELP = "export, import or summarise the plausibility annotations (rankings, rationales)"


def configure(p: argparse.ArgumentParser) -> None:
    """The `annotations` command with its subcommands export, import, stats and supporting-facts."""
    p.description = (textwrap.dedent("""\
            The annotation store is one SQLite file, annotations/annotations.sqlite3 under the project root
            (ENGINE_ANNOTATIONS_DB or --db overrides). Annotators fill it on the dashboard's Annotate page.

            Examples:
              python -m engine annotations stats
              python -m engine annotations export annotations.jsonl --csv rankings.csv
              python -m engine annotations import colleague.jsonl --db merged.sqlite3
            """))
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])  # no subcommand: show the subcommands
    sub = p.add_subparsers(dest="annotations_command", metavar="SUBCOMMAND")
    common = database_options()

    e = sub.add_parser("export", parents=[common], help="write every annotation as JSON lines (and rankings as CSV)",
                       description="Write annotators, tasks (with the explanations shown and their provenance), "
                       "rankings and rationales as JSON lines (ERASER-like rationale records). The file can be "
                       "imported into another store to merge annotators' work.")
    e.add_argument("out", help="the JSONL file to write (replaced atomically)")
    e.add_argument("--csv", default=None, metavar="FILE", help="also write the rankings as a tidy CSV "
                   "(one row per submission and explanation: slot, measure, rank)")
    e.set_defaults(func=cmd_export)

    i = sub.add_parser("import", parents=[common], help="merge a JSONL export into the store (idempotent)",
                       description="Import a JSONL export in one transaction: rows already present (tasks by id, "
                       "annotators by name, submissions by id) are skipped, and a file with a bad line imports nothing.")
    i.add_argument("file", help="a JSONL file written by `annotations export`")
    i.set_defaults(func=cmd_import)

    s = sub.add_parser("stats", parents=[common], help="counts, TrueSkill and Bradley-Terry ratings, agreement",
                       description="Summarise the store: rows per table, measures rated by TrueSkill (mu, sigma, "
                       "mu - 3 sigma) and Bradley-Terry, Kendall's W across annotators, Krippendorff's alpha "
                       "on rationales, and ERASER metrics of each measure against rationales.")
    s.add_argument("--model", default=None, help="only the tasks of this checkpoint id")
    s.add_argument("--json", action="store_true", help="print everything as JSON")
    s.set_defaults(func=cmd_stats)

    b = sub.add_parser("supporting-facts", help="bAbI: measures against the supporting facts (no annotation needed)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=textwrap.dedent("""\
                           Explain a bAbI checkpoint's predictions on a split with each measure and compare the scores
                           with the supporting facts, which are ground-truth rationales by construction: token-F1 of
                           the top-k tokens (k = mean number of supporting tokens), IOU-F1 (threshold 0.5), AUPRC.

                           Example:
                             python -m engine annotations supporting-facts --model tiny-babi-1-masked-s0 \\
                                 --measures random grad-l2 loo-sign --limit 200
                           """))
    b.add_argument("--model", required=True, help="a checkpoint trained on babi-1, babi-2 or babi-3")
    b.add_argument("--measures", nargs="+", required=True, help="importance measures to compare")
    b.add_argument("--split", default="test", help="dataset split (default test)")
    b.add_argument("--limit", type=int, default=100, help="first N examples of the split (default 100)")
    b.add_argument("--k", type=int, default=None, help="tokens kept for token-F1 and IOU-F1 (default: mean gold length)")
    b.add_argument("--json", action="store_true", help="print the rows as JSON")
    b.set_defaults(func=cmd_supporting_facts)


def _store(args, create: bool = False):
    from engine.annotation import AnnotationStore

    return AnnotationStore(annotation_database(args, create, "annotate on the dashboard first"))


def _guarded(handler):
    def run(args) -> int:
        try:
            return handler(args)
        except OSError as err:  # a file the user named cannot be read or written
            print(f"error: {err}", file=sys.stderr)
            return 2
    run.__name__ = handler.__name__
    return run


@_guarded
def _export(args) -> int:
    from engine.annotation.io import export_jsonl, rankings_csv

    store = _store(args)
    n = export_jsonl(store, args.out)
    print(f"wrote {n} records to {args.out}")
    if args.csv:
        from engine.atomic import write_text

        write_text(args.csv, rankings_csv(store))
        print(f"wrote the rankings to {args.csv}")
    return 0


@_guarded
def _import(args) -> int:
    from engine.annotation.io import import_jsonl

    store = _store(args, create=True)
    added = import_jsonl(store, args.file)
    print("imported " + ", ".join(f"{n} new {kind}" for kind, n in added.items()) + f" into {store.path}")
    return 0


def _fmt(value) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def _table(title: str, rows: list[dict], columns: list[str]) -> None:
    print(f"\n{title}")
    if not rows:
        print("  (none yet)")
        return
    print("  " + "  ".join(f"{c:>12}" for c in columns))
    for row in rows:
        print("  " + "  ".join(f"{_fmt(row.get(c)):>12}" for c in columns))


@_guarded
def _stats(args) -> int:
    from engine.annotation.summary import summary

    data = summary(_store(args), args.model)
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return 0
    print(f"{data['db']}: " + ", ".join(f"{n} {table}" for table, n in data["counts"].items()))
    print(f"{data['rankings_used']} rankings rated, {data['cannot_decide']} 'cannot decide'")
    _table("TrueSkill (ranked by mu - 3 sigma)", data["trueskill"], ["rank", "measure", "mu", "sigma", "conservative", "matches"])
    _table("Bradley-Terry (log strength, centred)", data["bradley_terry"], ["rank", "measure", "strength", "p_beats_average", "comparisons"])
    w = data["kendalls_w"]
    print(f"\nKendall's W (rankings): mean {_fmt(w['mean_W'])} over {w['tasks']} tasks ranked by 2+ annotators")
    a = data["rationale_agreement"]
    print(f"Rationale agreement: Krippendorff's alpha {_fmt(a['alpha'])}, mean Cohen's kappa {_fmt(a['mean_kappa'])} "
          f"over {a['tasks']} tasks")
    cols = ["measure", "n", "k", "token_f1", "iou_f1", "auprc"]
    _table("Measures against annotated rationales (ERASER)", data["against_annotated_rationales"], cols)
    if data["against_gold_rationales"]:
        _table("Measures against bAbI supporting facts", data["against_gold_rationales"], cols)
    return 0


@_guarded
def _supporting_facts(args) -> int:
    from engine.data import get_dataset
    from engine.models import CheckpointError, load_classifier
    from engine.plausibility.supporting_facts import supporting_fact_metrics

    try:
        classifier = load_classifier(args.model)
    except CheckpointError as err:
        raise InvalidInputError(str(err)) from None
    meta = classifier.meta
    dataset = get_dataset(meta.dataset, meta.split_seed)
    rows = supporting_fact_metrics(classifier, dataset, args.measures, split=args.split, limit=args.limit, k=args.k)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{args.model} on {dataset.name}/{args.split}: explanations of the predicted class against the supporting facts")
        _table("", rows, ["measure", "n", "k", "token_f1", "iou_f1", "auprc"])
    return 0


cmd_export, cmd_import, cmd_stats, cmd_supporting_facts = _export, _import, _stats, _supporting_facts


def run(args: argparse.Namespace) -> int:
    return args.func(args)

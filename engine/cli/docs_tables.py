"""`python -m engine docs-tables`: every results table of the docs, regenerated from results/ and results/published/."""
from __future__ import annotations

import argparse
import sys
import textwrap

HELP = "regenerate the docs' results tables from the shipped results; --check fails on a drifted table"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
        Compute every results table the documentation shows (README.md, docs/results.md, docs/evaluation.md) from
        the shipped results stores and the published numbers, and print them. Each table lives in its file
        between <!-- report:NAME --> and <!-- /report:NAME -->: --check exits 1 naming every table whose committed
        text differs from what this command prints (CI runs it), every table that reads a result of unknown code
        (no code version, or a "-dirty" one, the checkpoint's included; it counts them per table and names the
        files), and every shipped result whose recorded code version no commit holds ("-dirty";
        docs/reproduction.md); --write rewrites those regions. Published
        numbers are in columns marked "(published)"; a correlation with a paper's ordering is computed only
        against its row of the same task.""")
    parser.epilog = textwrap.dedent("""\
        examples:
          python -m engine docs-tables                        # print every table
          python -m engine docs-tables --check                # CI: do the docs say what the results say?
          python -m engine docs-tables --write                # update the docs after a new run
          python -m engine docs-tables --tables fmm-ordering  # one table""")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare the docs' regions with the tables; exit 1 on a difference")
    mode.add_argument("--write", action="store_true", help="rewrite the docs' regions with the tables")
    parser.add_argument("--tables", nargs="+", default=None, metavar="NAME",
                        help="only these tables (default: all; the names are listed by --list)")
    parser.add_argument("--list", action="store_true", help="list the tables and the file each lives in")
    parser.add_argument("--results-dir", default=None, help="results root to read (default: the project's results/)")
    parser.add_argument("--docs-root", default=None, help="project root whose README.md and docs/ are checked or "
                        "written (default: this checkout)")


def run(args: argparse.Namespace) -> int:
    from engine.reports.report import TABLES, build, build_with_inputs, code_provenance_check, sync, unknown_code_per_table

    if args.list:
        for table in TABLES:
            print(f"{table.name}\t{table.doc}")
        return 0
    if args.check:
        tables, inputs = build_with_inputs(args.tables, args.results_dir)
    else:
        tables = build(args.tables, args.results_dir)
    if args.check or args.write:
        problems = sync(tables, args.docs_root, write=args.write)
        for problem in problems:
            print(problem, file=sys.stderr)
        if args.write:
            print(f"{len(tables)} tables written where they differed")
            return 1 if problems else 0
        print(f"{len(tables) - len(problems)} of {len(tables)} tables as committed")
        # A table is only as reproducible as the code that computed what it reads: refuse one that reads a result of
        # unknown code (no code version, or a -dirty one: its own, its MaSF fit's or its checkpoint's).
        unknown = {name: lines for name, lines in unknown_code_per_table(inputs, args.results_dir).items() if lines}
        docs = {table.name: table.doc for table in TABLES}
        for name, lines in unknown.items():
            print(f"{docs[name]}: table {name} reads {len(lines)} result(s) of unknown code:", file=sys.stderr)
            for line in lines:
                print(f"  {line}", file=sys.stderr)
        n_unknown = sum(len(lines) for lines in unknown.values())
        print(f"{n_unknown} result(s) of unknown code read by {len(unknown)} of {len(tables)} tables" if unknown else
              f"0 results of unknown code: each of the {len(tables)} tables reads only results of committed code "
              f"({len({p for files in inputs.values() for p in files})} files)")
        # A table is only as reproducible as the code that computed its results: refuse code no commit holds.
        unheld = code_provenance_check(args.results_dir)
        for problem in unheld:
            print(problem, file=sys.stderr)
        print(f"{len(unheld)} shipped result fields name code no commit holds" if unheld else
              "every shipped result names committed code or carries its audit's label (scripts/archive/relabel_dirty_provenance.py)")
        return 1 if problems or unheld or unknown else 0
    for name, text in tables.items():
        print(f"<!-- report:{name} -->\n{text}\n<!-- /report:{name} -->\n")
    return 0

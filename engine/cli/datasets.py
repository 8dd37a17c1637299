"""`python -m engine datasets`: list the datasets (packaged and registered); `add` registers a file of the
user's, `columns` shows a file's columns, `remove` forgets a registration."""
from __future__ import annotations

import argparse
import sys
import textwrap

from engine.cli.arguments import print_listing

HELP = "list the datasets (packaged and your own); `datasets add` registers your file (CSV, TSV, JSONL, Parquet, save_to_disk)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
            List the datasets with their splits, metric and class-majority baseline: the packaged ones (all
            offline) and the files you registered. A registered dataset is used by name everywhere
            (train, faithfulness, benchmark, roar, masf, annotate, the dashboard).

            Register your own file (it is read in place, not copied; a manifest in <user dir>/datasets/ keeps
            its path, size, time and SHA-256, so a changed file is noticed):
              python -m engine datasets add reviews --file reviews.csv --text-column text --label-column label
              python -m engine datasets add nli --file nli.parquet --text-column premise --pair-column hypothesis \\
                  --label-column label --split-column split
              python -m engine datasets add esnli --file esnli.jsonl --text-column text --label-column label \\
                  --rationale-column evidence --rationale-unit token
              python -m engine datasets add hf --file saved_folder/ --text-column sentence --label-column label
              python -m engine datasets columns reviews.csv      # the columns and first rows of a file
              python -m engine datasets remove reviews

            Rules (docs/own-data.md): splits from --split-column (train / validation, val, dev / test), or seeded
            stratified 80/10/10; a split the column lacks is carved from train (10% of each class). Metric:
            macro-F1 when the smallest class has fewer than half the rows of the largest, else accuracy.
            Any bad row refuses the whole file with the rows named; nothing is registered then.
            """)
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the splits to describe. Default: 0")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")

    add = actions.add_parser("add", help="register a data file under a name", formatter_class=argparse.RawDescriptionHelpFormatter,
                             description="Validate FILE in chunks and register it as NAME (nothing is copied).")
    add.add_argument("name", metavar="NAME", help="the dataset's name: lower-case letters, digits, '.', '_', '-'")
    add.add_argument("--file", required=True, help="a .csv, .tsv, .jsonl, .parquet file, or a folder written by save_to_disk")
    add.add_argument("--text-column", required=True, help="column of the text that is classified, masked and explained")
    add.add_argument("--label-column", required=True, help="column of the labels (class names or whole numbers)")
    add.add_argument("--pair-column", default=None, help="column of a second text (question, hypothesis): paired input, never masked")
    add.add_argument("--split-column", default=None, help="column naming each row's split: train, validation (val, valid, dev) or "
                     "test. Default: seeded stratified 80/10/10 (a DatasetDict folder: its own splits)")
    add.add_argument("--rationale-column", default=None, help="column of ground-truth rationales: a list of [start, end) pairs "
                     "per row (or its JSON text); blank for none")
    add.add_argument("--rationale-unit", default="char", choices=["char", "token"],
                     help="what the rationale spans count: characters of the text, or its whitespace-separated words. Default: char")
    add.add_argument("--metric", default="auto", choices=["auto", "accuracy", "macro_f1"],
                     help="evaluation metric. Default: auto (macro-F1 when imbalanced, see above)")
    add.add_argument("--overwrite", action="store_true", help="replace a registration of the same name")
    add.add_argument("--quiet", action="store_true", help="no progress bar")

    columns = actions.add_parser("columns", help="show a file's columns and first rows (to choose the columns to register)")
    columns.add_argument("file", metavar="FILE")
    columns.add_argument("--rows", type=int, default=5, help="rows to show. Default: 5")

    remove = actions.add_parser("remove", help="forget a registered dataset (your file is left alone)")
    remove.add_argument("name", metavar="NAME")

    actions.add_parser("list", help="list the datasets (the default)")


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "action", None)
    if action == "add":
        return _add(args)
    if action == "columns":
        return _columns(args)
    if action == "remove":
        from engine.data.user import remove_user_dataset

        print(f"removed {remove_user_dataset(args.name)}")
        return 0
    return _list(args)


def _list(args: argparse.Namespace) -> int:
    from engine.data import PACKAGED_DATASETS, get_dataset
    from engine.data.user import datasets_dir, list_user_datasets, summary_from_manifest

    def line(name: str, s: dict, note: str = "") -> str:
        sizes = "/".join(str(s["sizes"][k]) for k in ("train", "validation", "test"))
        return (f"{name:8} {s['metric']:9} classes={len(s['classes'])} train/val/test={sizes:16} "
                f"majority baseline {s['majority_baseline_test']:.3f}  {'paired' if s['paired'] else 'single'}  "
                f"max_length={s['max_length']}{note}")

    for name in PACKAGED_DATASETS:
        print(line(name, get_dataset(name, args.split_seed).summary()))
    registered = list_user_datasets()
    if registered:
        print(f"\nregistered ({datasets_dir()}):")

    def user(m: dict) -> str:
        state = {"ok": "", "missing": "  [FILE MISSING]", "modified": "  [FILE MODIFIED: register again]"}[m["state"]]
        return line(m["name"], summary_from_manifest(m, args.split_seed), f"  {m['format']} {m['path']}{state}")

    print_listing(registered, user, lambda m: f"{m['name']:8} cannot be read: {m['error']}")
    return 0


def _columns(args: argparse.Namespace) -> int:
    import pandas as pd

    from engine.data.files import detect_format, list_columns, preview

    fmt = detect_format(args.file)
    frame = preview(args.file, rows=args.rows, fmt=fmt)
    print(f"{args.file} ({fmt}): columns {', '.join(map(repr, list_columns(args.file, fmt)))}")
    with pd.option_context("display.max_columns", None, "display.width", 160, "display.max_colwidth", 60):
        print(frame.to_string())
    return 0


def _add(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from engine.data.user import register_dataset

    bars = []  # made on the first chunk, so a refusal before any reading shows no bar

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(total=total, unit="B", unit_scale=True, desc="validating", disable=args.quiet, file=sys.stderr))
        bars[0].update(done - bars[0].n)

    try:
        m = register_dataset(
            args.name, args.file, args.text_column, args.label_column, pair_column=args.pair_column,
            split_column=args.split_column, rationale_column=args.rationale_column, rationale_unit=args.rationale_unit,
            metric=args.metric, overwrite=args.overwrite, command=args.command_line, progress=progress,
        )
    finally:
        for bar in bars:
            bar.close()
    sizes = m["split_sizes"]
    split_rule = {"stratified": "seeded stratified 80/10/10", "column": f"from column {m['columns']['split']!r}",
                  "folders": "from the DatasetDict's folders"}[m["split_source"]]
    if m["carved_splits"]:
        split_rule += f" ({' and '.join(m['carved_splits'])} carved from train)"
    print(f"registered {m['name']!r}: {m['rows']:,} rows of {m['path']} ({m['format']}), {len(m['classes'])} classes "
          f"({', '.join(f'{c} {n:,}' for c, n in m['class_counts'].items())})")
    print(f"splits {split_rule}: train {sizes['train']:,} / validation {sizes['validation']:,} / test {sizes['test']:,}")
    print(f"metric {m['metric']} ({m['metric_reason']}); max_length {m['max_length']}"
          + (f"; {m['rationale_rows']:,} rows with rationales" if m["columns"]["rationale"] else ""))
    print(f"use it by name: python -m engine train --dataset {m['name']}")
    return 0

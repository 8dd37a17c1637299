"""Markdown tables of an evaluation run for docs/evaluation.md: each aggregate erasure metric per measure beside its
MaSF share (masked and plain side by side), the Spearman of each metric's ranking of the measures with RACU's, and
the sanity verdicts. The tables in docs/ come from `python -m engine docs-tables`, which calls the same code.

    python scripts/experiments/evaluation_report.py --run tiny-rt-erasure --racu-run tiny-rt-3seeds --sanity-run tiny-rt-sanity
    python scripts/experiments/evaluation_report.py --smoke   # CI: a shipped run, checked to give its tables
"""
from __future__ import annotations

import argparse

from engine.reports.evaluation_tables import evaluation_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run")
    parser.add_argument("--racu-run", default=None, help="recursive-masking run of the same model family")
    parser.add_argument("--results-dir", default=None, help="results root holding evaluation/ and the RACU run "
                        "(default: the project's)")
    parser.add_argument("--sanity-run", default=None)
    parser.add_argument("--smoke", action="store_true", help="CI smoke run: the shipped minilm-rt runs")
    args = parser.parse_args()
    if args.smoke:
        text = evaluation_report("minilm-rt-erasure", "minilm-rt-3seeds", "minilm-rt-sanity", args.results_dir)
        if "| loo-sign |" not in text:
            raise SystemExit("smoke: the shipped run gave no table row for loo-sign")
        print(text)
        return
    if not args.run:
        parser.error("--run is required (or --smoke)")
    print(evaluation_report(args.run, args.racu_run, args.sanity_run, args.results_dir))


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    main()

"""`python -m engine docs-tables`: the docs' results tables are what the shipped results give, a drifted table is named
by --check and fixed by --write, published numbers are labelled, and FMM's ordering is compared per model and only
with FMM's row of the same task."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from engine.cli import main
from engine.reports.report import DROPPED_TABLES, TABLES, build, build_with_inputs, sync, unknown_code_per_table

ROOT = Path(__file__).resolve().parents[2]
CHEAP = ["racu-minilm-babi1-full", "attention"]  # two tables that build in about a second


def test_every_committed_table_is_what_report_prints_from_the_shipped_results():
    """The CI check: README.md and docs/ say what results/ and results/published/ say, table by table, and every
    table reads only results of committed code (no "-dirty" code version, the checkpoint's included, and none
    missing): the count of results of unknown code is zero for each."""
    tables, inputs = build_with_inputs()
    assert sync(tables, ROOT) == []
    assert all(inputs.values()), [name for name, files in inputs.items() if not files]
    assert {name: lines for name, lines in unknown_code_per_table(inputs).items() if lines} == {}


def test_a_dropped_table_has_no_region_left_in_its_doc():
    """A table dropped for reading results of unknown code leaves no stale region behind (its doc says instead
    that it was dropped and which command recomputes it)."""
    for table in DROPPED_TABLES:
        text = (ROOT / table.doc).read_text(encoding="utf-8")
        assert f"<!-- report:{table.name} -->" not in text and re.search(r"\*\*Tables? dropped", text)
        assert table.name not in {t.name for t in TABLES}


def _copy_docs(tmp_path: Path) -> Path:
    for doc in {t.doc for t in TABLES}:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    return tmp_path


def test_check_names_a_drifted_table_and_write_restores_it(tmp_path, capsys):
    docs = _copy_docs(tmp_path)
    results = docs / "docs" / "results.md"
    text = results.read_text(encoding="utf-8")
    region = re.search(r"<!-- report:racu-minilm-babi1-full -->\n(.*?)\n<!-- /report:racu-minilm-babi1-full -->", text, re.S)
    drifted = region.group(1).replace("| loo-sign | ", "| loo-sign | 99.9 ", 1)
    assert drifted != region.group(1)
    results.write_text(text.replace(region.group(1), drifted), encoding="utf-8")

    assert main(["docs-tables", "--check", "--tables", *CHEAP, "--docs-root", str(docs)]) == 1
    err = capsys.readouterr().err
    assert "racu-minilm-babi1-full" in err and "attention" not in err

    assert main(["docs-tables", "--write", "--tables", *CHEAP, "--docs-root", str(docs)]) == 0
    assert results.read_text(encoding="utf-8") == text
    assert main(["docs-tables", "--check", "--tables", *CHEAP, "--docs-root", str(docs)]) == 0


def test_a_table_without_its_region_is_reported(tmp_path):
    docs = _copy_docs(tmp_path)
    results = docs / "docs" / "results.md"
    results.write_text(results.read_text(encoding="utf-8").replace("<!-- report:attention -->", ""), encoding="utf-8")
    problems = sync(build(["attention"]), docs)
    assert len(problems) == 1 and "no region <!-- report:attention -->" in problems[0]


def test_published_columns_are_labelled_and_fmm_is_compared_only_on_the_same_task():
    tables = build(["summary", "fmm-ordering", "racu-tiny-babi1", "racu-minilm-rt", "attention", "beam-subsets"])
    for name, text in tables.items():
        header = text.splitlines()[0].split("|")
        for column in header:
            if any(paper in column for paper in ("FMM", "W&P", "R-ROAR")):
                assert "published" in column, (name, column)
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line for line in tables["fmm-ordering"].splitlines()[2:]}
    # FMM published bAbI-2, not bAbI-1: no correlation of our bAbI-1 with it, for any model.
    assert all("not compared" in line for (model, dataset), line in rows.items() if dataset == "babi-1")
    # rt is compared with SST2, per model: each model gets its own number.
    assert {("tiny", "rt"), ("minilm", "rt")} <= set(rows)
    assert rows[("tiny", "rt")].split("|")[6] != rows[("minilm", "rt")].split("|")[6]
    assert "another task" in tables["racu-tiny-babi1"].splitlines()[0]


def test_the_tables_cheaper_calls_leave_every_shown_number_as_the_full_calls_give_it():
    """report asks the table functions to skip the CIs it never shows (evaluation_table's per-level rows,
    judge_table's rows of one wrong explanation, recovery_table's MRR and mass share): every other cell must be the
    full call's, to the bit, and the skipped CIs NaN."""
    import numpy as np
    import pandas as pd

    from engine.faithfulness.evaluation import ERASURE, evaluation_store, evaluation_table
    from engine.groundtruth.card import card_store
    from engine.groundtruth.tables import judge_table, recovery_table

    root = Path(__file__).resolve().parents[2] / "results"

    def same_but(cheap: pd.DataFrame, full: pd.DataFrame, rows: np.ndarray, columns: list[str]) -> None:
        pd.testing.assert_frame_equal(cheap.drop(columns=columns), full.drop(columns=columns), check_exact=True)
        pd.testing.assert_frame_equal(cheap[~rows], full[~rows], check_exact=True)
        assert cheap.loc[rows, [c for c in columns if c != "ci"]].isna().all().all()

    data = evaluation_store(root / "evaluation").load("tiny-rt-erasure")  # three seeds: CIs to skip
    data = data[data["method"] == ERASURE]
    full = evaluation_table(data)
    same_but(evaluation_table(data, level_cis=False), full, full["level"].notna().to_numpy(), ["ci_low", "ci_high", "ci"])
    card = card_store(root / "groundtruth").load("smollm2-rt-card")
    full = judge_table(card)
    same_but(judge_table(card, wrong_cis=False), full, (full["wrong"] != "all").to_numpy(), ["low", "high"])
    full = recovery_table(card)
    same_but(recovery_table(card, cis=False), full, np.ones(len(full), bool),
             ["mrr_low", "mrr_high", "mass_share_low", "mass_share_high"])

"""The report card's markdown tables (engine/reports/groundtruth_tables.py): the metric x model grids (judges,
Spearman, operators) and the metric x wrong-explanation grid share one builder; each prints its caption, one column
per model (its 'gt-' prefix dropped) or wrong explanation, one row per judge metric in JUDGE_ORDER under its label,
and "—" where a model has no value for a metric. The shipped run's tables are checked by `report --check`."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from engine.groundtruth.explanations import PREFIX
from engine.reports import groundtruth_tables
from engine.reports.groundtruth_tables import judge_markdown, operator_markdown, spearman_markdown, wrong_markdown
from engine.stats import wilson_ci

UIDS = ("u0", "u1", "u2", "u3")


def _rows(model: str, operator: str, measure: str, metric: str, value: float, kind: str = "metric") -> list[dict]:
    better = "higher"
    return [{"method": "report-card", "model": model, "mechanism": "trigger", "operator": operator, "measure": measure,
             "kind": kind, "uid": uid, "metric": metric, "value": value, "better": better, "n_perturbed": 5.0,
             "n_ood": 1.0, "p_value": np.nan} for uid in UIDS]


def _card() -> pd.DataFrame:
    """gt-a under [MASK] and delete, gt-b under [MASK] only. Judges (true vs strongest-other-first, the same value on
    every input): gt-a AOPC 0.9 vs 0.1 (true preferred), top-1 flip 0 vs 1 under [MASK] (wrong preferred) and 1 vs 0
    under delete (the verdict changes); gt-b AOPC 0.5 vs 0.5 (a tie). Measures m1 > m2 > m3 by the truth (reciprocal
    rank); gt-a's metrics order them alike, gt-b's AOPC in reverse."""
    rows = []
    for operator, flip in (("mask", (0.0, 1.0)), ("delete", (1.0, 0.0))):
        rows += _rows("gt-a", operator, PREFIX + "true", "aopc-comprehensiveness", 0.9)
        rows += _rows("gt-a", operator, PREFIX + "strongest-other-first", "aopc-comprehensiveness", 0.1)
        rows += _rows("gt-a", operator, PREFIX + "true", "top1-flip", flip[0])
        rows += _rows("gt-a", operator, PREFIX + "strongest-other-first", "top1-flip", flip[1])
    rows += _rows("gt-b", "mask", PREFIX + "true", "aopc-comprehensiveness", 0.5)
    rows += _rows("gt-b", "mask", PREFIX + "strongest-other-first", "aopc-comprehensiveness", 0.5)
    for model in ("gt-a", "gt-b"):
        for measure, rr in (("m1", 1.0), ("m2", 0.5), ("m3", 0.25)):
            rows += _rows(model, "mask", measure, "reciprocal-rank", rr, kind="recovery")
            rows += _rows(model, "mask", measure, "aopc-comprehensiveness", rr if model == "gt-a" else -rr)
            if model == "gt-a":
                rows += _rows(model, "mask", measure, "top1-flip", rr)
    return pd.DataFrame(rows)


@pytest.fixture()
def card(monkeypatch):
    frame = _card()
    monkeypatch.setattr(groundtruth_tables, "_load", lambda root, run: frame)


def test_judges_one_column_per_model_and_a_dash_where_a_model_lacks_the_metric(card):
    assert judge_markdown("r", "mask")(None).splitlines() == [
        "Operator [MASK]: share of inputs (x wrong explanations) on which the metric prefers the true explanation "
        "(higher better; 50% = chance), 95% bootstrap CI, its effect size d_z (Cohen's paired d of the true "
        "explanation's value over the wrong ones', positive favours the truth; * where the win rate differs from "
        "chance at a 5% false discovery rate, Benjamini-Hochberg over every row of the judge table), [MaSF share "
        "p<0.05 of its perturbed inputs].", "",
        "| metric | a | b |", "|---|---|---|",
        # the same value on every input: a constant difference has an infinite d_z (0 for a tie); with 5 inputs a
        # sign test cannot reach q < 0.05 (p = 2/32), so no star
        "| AOPC comprehensiveness | 100% (100%-100%), d_z ∞ [20%] | 50% (50%-50%), d_z 0.0 [20%] |",
        "| top-1 flip | 0% (0%-0%), d_z -∞ [20%] | — |"]
    assert judge_markdown("r", "unk")(None) == "(no unk cells in results/groundtruth/r yet)"


def test_wrong_explanations_are_the_columns_pooled_over_the_models(card):
    assert wrong_markdown("r", "mask")(None).splitlines()[2:] == [
        "| metric | strongest-other-first |", "|---|---|",
        "| AOPC comprehensiveness | 75% (2 models) |",
        "| top-1 flip | 0% (1 models) |"]


def test_spearman_one_column_per_model(card):
    lines = spearman_markdown("r", "mask")(None).splitlines()
    assert "ranking of the 3 measures" in lines[0]
    assert lines[2:] == ["| metric | a | b |", "|---|---|---|",
                         "| AOPC comprehensiveness | 1.00 (1.00 to 1.00) | -1.00 (-1.00 to -1.00) |",
                         "| top-1 flip | 1.00 (1.00 to 1.00) | — |"]


def test_operators_only_models_judged_under_two_of_them(card):
    lines = operator_markdown("r")(None).splitlines()
    assert lines[0].startswith("Share of (input, wrong explanation) verdicts that change between the operators "
                               "([MASK] / delete;")
    low, high = wilson_ci(0, 4)
    low4, high4 = wilson_ci(4, 4)
    assert lines[2:] == ["| metric | a |", "|---|---|",
                         f"| AOPC comprehensiveness | 0% ({low:.0%}-{high:.0%}) |",
                         f"| top-1 flip | 100% ({low4:.0%}-{high4:.0%}) |"]


def test_an_empty_run_says_so(monkeypatch):
    monkeypatch.setattr(groundtruth_tables, "_load", lambda root, run: pd.DataFrame())
    assert judge_markdown("r")(None) == "(no judge cells in results/groundtruth/r yet)"
    assert wrong_markdown("r")(None) == "(no judge cells in results/groundtruth/r yet)"
    assert spearman_markdown("r")(None) == "(no measure cells in results/groundtruth/r yet)"
    assert operator_markdown("r")(None) == "(fewer than two operators in results/groundtruth/r yet)"


def test_every_table_of_a_run_not_computed_yet_says_so(tmp_path):
    """A report-card run with no folder at all (a card registered in the report before its cells land): every table
    builder says which cells are missing instead of failing (the truth table raised KeyError 'model')."""
    from engine.reports.groundtruth_tables import cost_markdown, recovery_markdown, truth_markdown

    for builder in (truth_markdown, recovery_markdown, judge_markdown, wrong_markdown, spearman_markdown,
                    operator_markdown, cost_markdown):
        text = builder("not-run-yet")(tmp_path)
        assert text.startswith("(") and "results/groundtruth/not-run-yet" in text, (builder.__name__, text)

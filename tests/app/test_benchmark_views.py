"""The Benchmarks page's new views, below the page: the budget run's summaries (NAOPC, RACU with CIs, the Pareto
front, the anytime search against beam's curve), the Pareto figure, an uploaded scores file evaluated end to end
beside the built-in measure it was written from, and faithfulness against plausibility from an annotation store."""
from __future__ import annotations

import csv
import json
import re

import numpy as np
import pandas as pd
import pytest
from explanation_rows import loo_score_rows

from engine.results.budget_pareto import CORRECT

pytestmark = pytest.mark.usefixtures("one_thread")


def _summary(points: list[tuple[str, float, float, float]]) -> pd.DataFrame:
    """(method, multiple, forwards, racu) rows as `summarise` returns them (naopc = racu / 100 here)."""
    return pd.DataFrame([{"method": m, "multiple": c, "forwards": f, "racu": r, "naopc": r / 100, "aopc": r / 1000,
                          "racu_low": r - 5, "racu_high": r + 5, "naopc_low": np.nan, "naopc_high": np.nan}
                         for m, c, f, r in points])


def test_pareto_front_keeps_exactly_the_points_no_other_is_cheaper_and_better_than():
    from engine.results.budget_pareto import pareto_front

    s = _summary([("loo", 0, 10, 50), ("greedy-loo", 0, 100, 70), ("beam-2", 0, 200, 65), ("anytime", 1, 100, 70),
                  ("anytime", 2, 200, 80), ("beam-20", 0, 1000, 80)])
    front = pareto_front(s, "racu").tolist()
    # beam-2 (dearer and worse than greedy) and beam-20 (dearer than anytime @ 2, no better) are dominated; two
    # points with the same cost and value (greedy, anytime @ 1) dominate neither
    assert front == [True, True, False, True, True, False]


def test_anytime_is_compared_with_the_best_beam_its_budget_affords():
    from engine.results.budget_pareto import anytime_against_beam, beam_curve_at

    s = _summary([("loo", 0, 10, 50), ("greedy-loo", 0, 100, 70), ("beam-2", 0, 200, 75), ("beam-20", 0, 1000, 90),
                  ("anytime", 0.5, 50, 60), ("anytime", 2, 200, 74), ("anytime", 20, 2000, 95)])
    assert np.isnan(beam_curve_at(s, 5, "racu")), "nothing on beam's curve costs less than LOO"
    assert beam_curve_at(s, 150, "racu") == 70
    versus = anytime_against_beam(s, "racu")
    assert versus["multiple"].tolist() == [0.5, 2], "budgets past beam-20's cost are not compared"
    assert versus["beam"].tolist() == [50, 75]
    assert versus["above"].tolist() == [True, False]


def test_racu_from_per_input_correctness_equals_the_metric_on_the_mean_curves_and_lies_in_its_ci():
    from engine.faithfulness.metrics import racu
    from engine.results.budget_pareto import RATIOS, racu_with_ci

    rng = np.random.default_rng(3)
    n = 60
    random = np.clip(np.linspace(1, 0.5, 11)[None] + rng.normal(0, 0.1, (n, 11)), 0, 1)
    method = (rng.random((n, 11)) < np.linspace(1, 0.3, 11)[None]).astype(float)
    value, low, high = racu_with_ci(method, random)
    assert value == pytest.approx(racu(RATIOS, method.mean(0), random.mean(0)))
    assert low < value < high
    _, low1, high1 = racu_with_ci(method[:1], random[:1])
    assert np.isnan(low1) and np.isnan(high1), "one input has no interval"


def _points() -> pd.DataFrame:
    rows = []
    for i in range(8):
        common = {"input": i, "n_tokens": 10, "lower": 0.1, "upper": 0.5, "bounds_exact": 1, "complete": 1}
        rows.append({**common, "method": "random", "multiple": 0.0, "forwards": 0, "aopc": 0.2,
                     **{c: 1 - k / 20 for k, c in enumerate(CORRECT)}})
        rows.append({**common, "method": "loo", "multiple": 0.0, "forwards": 11, "aopc": 0.3 + 0.01 * i,
                     **{c: float(k < 3 + i % 2) for k, c in enumerate(CORRECT)}})
        rows.append({**common, "method": "anytime", "multiple": 2.0, "forwards": 112, "aopc": 0.5,
                     **{c: float(k < 2) for k, c in enumerate(CORRECT)}})
    return pd.DataFrame(rows)


def test_summary_normalises_each_inputs_aopc_by_its_bounds_and_the_report_states_the_comparison():
    from engine.results.budget_pareto import markdown_table, summarise

    s = summarise(_points(), n_resamples=200).set_index("method")
    assert s.loc["loo", "naopc"] == pytest.approx(np.mean([(0.3 + 0.01 * i - 0.1) / 0.4 for i in range(8)]))
    assert s.loc["anytime", "naopc"] == pytest.approx(1.0)
    assert s.loc["anytime", "forwards_per_g"] == pytest.approx(2.0)
    assert s.loc["anytime", "racu"] > s.loc["loo", "racu"] > 0
    text = markdown_table(_points(), {"config": {"dataset": "rt", "split": "test"}, "checkpoint": "m"}, "demo")
    assert "| anytime | 2 | 112 (2.00 G) |" in text
    assert "8 rt test inputs of 10-10 tokens" in text


def test_pareto_figure_draws_a_trace_per_method_the_front_and_escapes_names():
    from app.budget_view import pareto_figure

    s = _summary([("loo", 0, 10, 50), ("greedy-loo", 0, 100, 70), ("anytime", 1, 100, 72), ("anytime", 2, 200, 80),
                  ("<b>x</b>", 0, 300, 10)])
    fig = pareto_figure(s, "racu")
    names = [t.name for t in fig.data]
    assert names.count("anytime") == 1 and "Pareto front" in names and "beam's curve" in names
    assert "&lt;b&gt;x&lt;/b&gt;" in names and "<b>x</b>" not in names
    front = next(t for t in fig.data if t.name == "Pareto front")
    assert list(front.x) == [10, 100, 200]
    anytime = next(t for t in fig.data if t.name == "anytime")
    assert list(anytime.x) == [100, 200] and anytime.error_y.array is not None
    assert fig.layout.xaxis.type == "log"


# -- upload ------------------------------------------------------------------------------------------------------

LIMIT = 5


@pytest.fixture()
def loo_file_rows(toy_classifier):
    """[(example, tokens, offsets, maskable, loo-sign scores)] of the first LIMIT toy test inputs (gold label)."""
    return loo_score_rows(toy_classifier, LIMIT)


def _csv_bytes(rows, shift: int = 0) -> bytes:
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "start", "end", "score"])
    for ex, _tokens, offsets, maskable, scores in rows:
        for (s, e), m, v in zip(offsets, maskable, scores):
            if m:
                w.writerow([ex.uid, s + shift, e + shift, repr(v)])
    return buf.getvalue().encode()


def _ferret_bytes(rows) -> bytes:
    return json.dumps([{"text": ex.primary, "tokens": tokens, "scores": scores, "explainer": "by-ferret",
                        "target": ex.label} for ex, tokens, _o, _m, scores in rows]).encode()


def test_an_uploaded_csv_and_ferret_file_evaluate_exactly_as_the_measure_they_were_written_from(
        toy_classifier, loo_file_rows, tmp_path):
    """Files made here from loo-sign's scores, uploaded as our CSV and as ferret's JSON, give every erasure metric
    and NAOPC equal to loo-sign's own, in columns side by side with it (and random beside them)."""
    from app.own_scores import aggregate_rows, evaluate_upload
    from engine.data import get_dataset

    dataset = toy_classifier.check_dataset(get_dataset("toy"))
    for data, filename, mid in ((_csv_bytes(loo_file_rows), "my scores.csv", "imported:my-scores"),
                                (_ferret_bytes(loo_file_rows), "ferret.json", "imported:ferret")):
        result = evaluate_upload(data, filename, toy_classifier, dataset, builtin=("loo-sign", "random"),
                                 limit=LIMIT, naopc=True, folder=tmp_path)
        assert result.n_inputs == LIMIT and result.measures == [mid]
        table = result.table
        assert list(table.columns[-3:]) == [mid, "loo-sign", "random"]
        np.testing.assert_array_equal(table[mid].to_numpy(), table["loo-sign"].to_numpy())
        for metric, values in result.per_input["loo-sign"].items():
            np.testing.assert_array_equal(result.per_input[mid][metric], values)
        head = aggregate_rows(table)
        assert {"aopc-comprehensiveness", "aopc-sufficiency", "naopc-comprehensiveness"} <= set(head["metric"])
        naopc = head.set_index("metric").loc["naopc-comprehensiveness"]
        assert 0 <= naopc[mid] <= 1 and naopc[mid] > naopc["random"]


def test_an_upload_with_a_bad_row_is_refused_naming_the_row_and_its_text_is_escaped_on_the_page(
        toy_classifier, loo_file_rows, tmp_path):
    from app.own_scores import UploadError, evaluate_upload, save_upload
    from app.text import md
    from engine.data import get_dataset
    from engine.errors import InvalidInputError

    dataset = toy_classifier.check_dataset(get_dataset("toy"))
    with pytest.raises(InvalidInputError, match=r"line \d+"):
        evaluate_upload(_csv_bytes(loo_file_rows, shift=1), "shifted.csv", toy_classifier, dataset, limit=LIMIT,
                        naopc=False, folder=tmp_path)
    hostile = [(type("E", (), {"uid": "[x](http://evil)", "primary": "<b>bold</b>", "label": 0})(), ["a"],
                [(0, 1)], [True], [1.0])]
    with pytest.raises(InvalidInputError, match="line 2") as err:
        evaluate_upload(_csv_bytes(hostile), "hostile.csv", toy_classifier, dataset, limit=1, naopc=False,
                        folder=tmp_path)
    shown = md(err.value)
    outside_code = re.sub(r"`+[^`]*`+", "", shown)  # a code span is never a link (md puts addresses in one)
    assert "](" not in outside_code.replace("\\]\\(", ""), "a markdown link in the file stays text on the page"
    with pytest.raises(UploadError, match="unsupported file type '.exe'"):
        save_upload(b"x", "scores.exe", tmp_path)
    with pytest.raises(UploadError, match="empty"):
        save_upload(b"  ", "scores.csv", tmp_path)
    assert save_upload(b"a", "../../etc/pass wd.csv", tmp_path).name == "pass-wd.csv"


# -- faithfulness against plausibility ----------------------------------------------------------------------------


def _tidy(measure: str, seed: int, drop: float) -> pd.DataFrame:
    ratios = np.linspace(0, 1, 11)
    return pd.DataFrame({"model": f"m-s{seed}", "seed": seed, "dataset": "toy", "split": "test", "measure": measure,
                         "strategy": "masked", "method": "recursive masking", "schedule": "ratio",
                         "base_model": "tiny", "n_examples": 10, "ratio": ratios, "metric": "accuracy",
                         "value": 1 - drop * ratios ** 0.5 if measure != "random" else 1 - 0.5 * ratios})


def test_faithfulness_against_plausibility_joins_measures_with_intervals_on_both_axes(tmp_path):
    """RACU per measure over seeds (CI) against AUPRC from an annotation store's rationales (CI over inputs) and
    the TrueSkill rating; the AUPRC means equal the annotation summary's, and a measure on one side only is left out."""
    from app.faith_plausibility import (
        auprc_by_measure,
        figure,
        joined,
        plausibility_by_measure,
        racu_by_measure,
        spearman,
    )
    from engine.annotation import AnnotationStore
    from engine.plausibility import make_task, measures_against_rationales

    rows = pd.concat([_tidy(m, s, d + 0.02 * s) for s in range(3)
                      for m, d in (("random", 0), ("loo-sign", 0.6), ("grad-l2", 0.45), ("ig-sign", 0.5))])
    faith = racu_by_measure(rows).set_index("measure")
    assert set(faith.index) == {"loo-sign", "grad-l2", "ig-sign"}
    assert (faith["low"] <= faith["value"]).all() and (faith["value"] <= faith["high"]).all()
    assert faith.loc["loo-sign", "value"] > faith.loc["grad-l2", "value"]

    store = AnnotationStore(tmp_path / "a.sqlite")
    rng = np.random.default_rng(0)
    tasks = []
    for i in range(6):
        tokens = [f"w{j}" for j in range(6)]
        scores = {"loo-sign": [5, 4, 0, 0, 0, 0], "grad-l2": list(rng.random(6)), "ig-sign": [0, 0, 0, 0, 1, 2],
                  "lime": [1, 0, 0, 0, 0, 0]}
        tasks.append(make_task("m-s0", f"text {i}", tokens, scores))
    store.add_tasks(tasks)
    for t in tasks:
        store.submit_rationale(t.id, "ann", [0, 1])
        by_measure = {e.measure: e.slot for e in t.explanations}
        store.submit_ranking(t.id, "ann", [by_measure[m] for m in ("loo-sign", "grad-l2", "lime", "ig-sign")])
    plaus = plausibility_by_measure(store, "m-s0")
    human = plaus["auprc-human"].set_index("measure")
    reference = {r["measure"]: r["auprc"] for r in
                 measures_against_rationales(store.tasks("m-s0"), {t.id: [(0, 1)] for t in tasks})}
    for m, v in reference.items():
        assert human.loc[m, "value"] == pytest.approx(v)
    assert human.loc["loo-sign", "value"] == pytest.approx(1.0)
    assert plaus["rating"].set_index("measure").loc["loo-sign", "value"] > \
        plaus["rating"].set_index("measure").loc["ig-sign", "value"]
    assert auprc_by_measure(store.tasks("m-s0")).empty, "no gold rationale in these tasks"
    both = joined(faith.reset_index(), plaus["auprc-human"])
    assert list(both["measure"]) == ["grad-l2", "ig-sign", "loo-sign"], "lime has no RACU: left out"
    assert spearman(both) == pytest.approx(0.5)
    fig = figure(both, "RACU", "AUPRC")
    assert len(fig.data) == 3 and all(t.error_x.array is not None and t.error_y.array is not None for t in fig.data)

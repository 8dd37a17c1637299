"""The metric registry (engine/faithfulness/registry.py): one entry per metric that every consumer reads.

Checked here: its descriptions import no torch (so every `--help` reads them); `evaluate --help` and `report-card
--help` list its metrics; a metric added to the registry appears in `evaluate`'s choices and help, in the report
card's families and judge table, and in the Benchmarks page's labels without touching any of them; the orders that
are part of stored cells' keys are those the cells were written with; `--operator` and its old names parse alike.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from engine.faithfulness import registry


def test_importing_the_registry_descriptions_imports_no_torch():
    """The registry, and `evaluate` / `report-card` configuring their parsers from it, load neither torch nor
    numpy: a `--help` stays fast."""
    code = ("import sys, argparse\nfrom engine.faithfulness import registry\n"
            "from engine.cli import metrics as metrics_command, report_card\n"
            "for m in (metrics_command, report_card):\n    m.configure(argparse.ArgumentParser())\n"
            "registry.describe_families(registry.card_families())\n"
            "assert 'torch' not in sys.modules, 'torch imported'\nassert 'numpy' not in sys.modules, 'numpy imported'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def _help(module) -> str:
    parser = argparse.ArgumentParser(formatter_class=argparse.RawDescriptionHelpFormatter)
    module.configure(parser)
    return parser.format_help()


def test_evaluate_and_report_card_help_list_every_metric_of_their_families_with_its_direction():
    """Each command's --help names every metric of each family it takes, with the registry's direction."""
    from engine.cli import metrics as metrics_command
    from engine.cli import report_card

    for module, families in ((metrics_command, registry.evaluate_families()), (report_card, registry.card_families())):
        text = _help(module)
        for family in families:
            assert f"  {family}: " in text
            for mid in registry.metrics_of(family):
                assert f"{mid}{'@level' if registry.METRICS[mid].levels else ''} ({registry.better(mid)} = better" \
                    in text, (module.__name__, mid)


def test_the_orders_in_stored_cells_keys_are_those_the_cells_were_written_with():
    """Default runs resume: evaluate's default families, the card's families and its judge rows keep the order
    of the tuples they replaced (the families are part of the cells' keys; the judges order the tables)."""
    assert registry.default_evaluate_families() == ["comprehensiveness", "sufficiency", "deletion", "insertion",
                                                    "decision-flip", "soft"]
    assert registry.evaluate_families()[:7] == [*registry.default_evaluate_families(), "f-fidelity"]
    assert registry.default_card_families() == registry.card_families()[:10] == [
        "racu", "comprehensiveness", "sufficiency", "naopc", "f-fidelity", "soft", "deletion", "insertion",
        "decision-flip", "randomisation"]
    assert list(registry.judges())[:14] == [
        "acu", "comprehensiveness@0.1", "sufficiency@0.1", "aopc-comprehensiveness", "aopc-sufficiency",
        "naopc-comprehensiveness", "ffid-plus", "ffid-minus", "soft-comprehensiveness", "soft-sufficiency",
        "deletion-area", "insertion-area", "top1-flip", "randomisation-win-rate"]
    assert registry.judges()["acu"] == ("RACU (fixed ranking)", "higher")
    from engine.groundtruth.card_config import DEFAULT_METRIC_FAMILIES
    from engine.groundtruth.tables import JUDGE_ORDER

    assert list(DEFAULT_METRIC_FAMILIES) == registry.default_card_families() and JUDGE_ORDER == tuple(registry.judges())


def test_the_registry_refuses_a_duplicate_an_unknown_family_and_a_direction_that_is_not_one():
    """Two entries cannot share an id; a metric names a registered family and says 'higher' or 'lower'."""
    from engine.errors import InvalidInputError

    first = registry.METRICS["deletion-area"]
    with pytest.raises(InvalidInputError, match="twice"):
        registry.register(replace(first, better="higher"))
    with pytest.raises(InvalidInputError, match="unknown family"):
        registry.register(replace(first, id="x-new", family="no-such-family"))
    with pytest.raises(InvalidInputError, match="better must be"):
        registry.register(replace(first, id="x-new", better="up"))
    with pytest.raises(InvalidInputError, match="known metrics"):
        registry.better("no-such-metric")
    assert registry.better("deletion@0.3") == "lower" and registry.family_of("soft-nc") == "soft"


@pytest.fixture()
def new_metric(monkeypatch):
    """A family 'x-probe' with one judged, aggregate metric 'x-probe-score', added to the registry for one test."""
    monkeypatch.setattr(registry, "FAMILIES", dict(registry.FAMILIES))
    monkeypatch.setattr(registry, "METRICS", dict(registry.METRICS))
    registry.register_family(registry.Family("x-probe", "a probe family", needs=("operator",),
                                             function="engine.faithfulness.registry:MetricValues",
                                             default_evaluate=False, default_card=False))
    registry.register(registry.Metric("x-probe-score", "x-probe", "lower", "probe score", "a probe's definition",
                                      judge="x-probe-score", aggregate=True))
    return "x-probe-score"


def test_a_metric_added_to_the_registry_is_offered_by_evaluate_and_the_card_without_touching_them(new_metric):
    """evaluate's --metrics and the card's --metrics accept the new family, their --help lists its metric, and
    neither command's default changes (the default cells' keys stay)."""
    from engine.cli import metrics as metrics_command
    from engine.cli import report_card

    for module in (metrics_command, report_card):
        parser = argparse.ArgumentParser()
        module.configure(parser)
        required = ["--model", "m"] + (["--dataset", "d"] if module is metrics_command else [])
        args = parser.parse_args([*required, "--metrics", "x-probe"])
        assert args.metrics == ["x-probe"]
        assert "x-probe" not in parser.parse_args(required).metrics
        listed = [line for line in _help(module).splitlines() if "x-probe-score (lower = better)" in line]
        assert listed and listed[0].endswith(": a probe's definition"), module.__name__
    assert "x-probe" in registry.function_families() and "x-probe" not in registry.kernel_families()


def _card_rows(metric: str, better: str) -> pd.DataFrame:
    """Report-card rows of a trigger model: the true and two wrong explanations scored by `metric` on 6 inputs,
    the true one better on each."""
    rows = []
    sign = 1.0 if better == "higher" else -1.0
    for measure, value in (("true", 1.0), ("strongest-other-first", 0.0), ("planted-second", 0.5)):
        for uid in range(6):
            rows.append({"model": "gt-x", "mechanism": "trigger", "operator": "mask", "measure": f"explanation:{measure}",
                         "kind": "metric", "uid": str(uid), "metric": metric, "value": sign * value + 0.01 * uid,
                         "better": better, "n_perturbed": 1.0, "n_ood": 0.0, "p_value": np.nan,
                         "method": "report-card"})
    return pd.DataFrame(rows)


def test_a_metric_added_to_the_registry_gets_its_row_in_the_card_judge_table(new_metric):
    """The judge table's rows come from the registry: rows of the new metric are judged, under its label, and
    its direction decides which explanation it prefers."""
    from engine.groundtruth.tables import judge_table

    table = judge_table(_card_rows(new_metric, "lower"), wrong_cis=False)
    pooled = table[table["wrong"] == "all"].set_index("metric")
    assert pooled.loc[new_metric, "label"] == "probe score"
    assert pooled.loc[new_metric, "prefers_true"] == 1.0  # lower is better and the true explanation is lowest


def test_without_its_registry_entry_a_metric_gets_no_judge_row():
    """The converse: rows of a metric the registry does not know are not judged (the rows above are the cause)."""
    from engine.groundtruth.tables import judge_table

    assert judge_table(_card_rows("x-probe-score", "lower"), wrong_cis=False).empty


def test_a_metric_added_to_the_registry_is_labelled_on_the_benchmarks_page(new_metric, tmp_path, monkeypatch):
    """app/column_labels labels a column named by the new metric from the registry, and the Benchmarks page's
    evaluation section offers it with its label once an evaluation run has its rows."""
    from streamlit.testing.v1 import AppTest

    from app.column_labels import column_config, label
    from engine.faithfulness.evaluation import ERASURE
    from engine.results import ResultsStore

    assert label(new_metric) == "probe score (lower: more faithful)"
    config = column_config(pd.DataFrame({new_metric: [0.5]}))
    assert config[new_metric]["label"] == "probe score (lower: more faithful)"
    assert config[new_metric]["help"] == "a probe's definition"

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path))
    store = ResultsStore(tmp_path / "evaluation")
    for measure in ("random", "loo-sign"):
        rows = pd.DataFrame([{"model": "tiny-rt-masked-s0", "seed": 0, "dataset": "rt", "split": "test",
                              "measure": measure, "strategy": "masked", "base_model": "tiny", "method": ERASURE,
                              "removal": "mask", "step": 0, "metric": new_metric, "level": np.nan, "ratio": np.nan,
                              "value": 0.1, "better": "lower", "p_below_005": 0.1, "p_value": 0.5, "n_examples": 4,
                              "seconds_per_explanation": 0.01}])
        store.write_cell("r", {"measure": measure}, rows, {"command": "test"})

    def page():
        from app.evaluation_tab import render_evaluation_tab

        render_evaluation_tab()

    at = AppTest.from_function(page, default_timeout=60)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    box = next(s for s in at.selectbox if s.label == "Metric")
    assert box.options == ["probe score (lower: more faithful)"]
    assert any(c.value.startswith("a probe's definition.") for c in at.caption)


def test_operator_and_its_old_names_parse_alike():
    """`--operator` is the removal's one name in evaluate and report-card; `--removal` / `--replacements` are
    aliases for this release and land in the same place; each help says so."""
    from engine.cli import metrics as metrics_command
    from engine.cli import report_card

    parser = argparse.ArgumentParser()
    metrics_command.configure(parser)
    base = ["--model", "m", "--dataset", "d"]
    assert parser.parse_args([*base, "--operator", "delete"]).operator == "delete"
    assert parser.parse_args([*base, "--removal", "delete"]).operator == "delete"
    assert parser.parse_args(base).operator == "mask"
    parser = argparse.ArgumentParser()
    report_card.configure(parser)
    assert parser.parse_args(["--model", "m", "--operator", "mask", "unk"]).operator == ["mask", "unk"]
    assert parser.parse_args(["--model", "m", "--replacements", "delete"]).operator == ["delete"]
    assert "--removal: its old name, an alias kept for this release" in " ".join(_help(metrics_command).split())
    assert "--replacements: its old name, an alias kept for this release" in " ".join(_help(report_card).split())


def test_the_erasure_kernel_and_the_public_table_read_the_registry():
    """erasure_metrics' defaults and engine.ERASURE_METRICS come from the registry (no copy of their own)."""
    import engine
    from engine.faithfulness import erasure

    assert erasure.ERASER_BINS == registry.family_options("comprehensiveness")["bins"]
    assert erasure.CURVE_RATIOS == registry.family_options("deletion")["ratios"]
    # the default: every kernel family but those computed only when asked for (pi-soft adds rows no default cell has)
    assert erasure._select_families(None) == tuple(f for f in registry.kernel_families()
                                                   if f in registry.default_evaluate_families())
    assert "pi-soft" in registry.kernel_families() and "pi-soft" not in erasure._select_families(None)
    assert erasure._select_families(["soft-nc", "aopc-sufficiency"]) == ("soft", "sufficiency")
    table = engine.ERASURE_METRICS
    assert table["deletion-area"] == ("lower", registry.METRICS["deletion-area"].definition)
    assert "acu" not in table and set(table) <= set(registry.METRICS)


def test_the_judge_table_gives_each_win_rate_its_effect_size_and_a_false_discovery_adjusted_test(new_metric):
    """Beside each win rate: Cohen's paired d_z (positive favours the truth), the sign test against chance and its
    Benjamini-Hochberg q over the table's rows. Six wins out of six: p = 2/64 per wrong explanation, twelve of
    twelve pooled; the q-values are scipy's false_discovery_control of the rows' p-values."""
    from scipy.stats import false_discovery_control

    from engine.groundtruth.tables import judge_table

    table = judge_table(_card_rows(new_metric, "lower"), wrong_cis=False).set_index("wrong")
    assert table.loc["strongest-other-first", "p_sign"] == pytest.approx(2 / 64)
    assert table.loc["all", "p_sign"] == pytest.approx(2 / 4096)
    assert (table["d_z"] > 0).all()  # the true explanation is lower (better) on every input
    # d_z of a constant difference is infinite; here the true one is 1 lower than strongest-other-first everywhere
    assert table.loc["strongest-other-first", "d_z"] == float("inf")
    np.testing.assert_allclose(table["q_bh"].to_numpy(), false_discovery_control(table["p_sign"].to_numpy(), method="bh"))

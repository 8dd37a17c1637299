"""The home page and what it ranks (app/trust.py): the measures ranked by the evidence the shipped results hold for a
model (its recursive-masking runs, else its family's; a report card), each with its interval and its source; the
"none" answer for a model without evidence; and the page itself, driven by Streamlit's AppTest: the default page,
following the sidebar's model, each ranked measure one link from Explain on an example with that measure."""
from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest
from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

from app import trust
from engine.faithfulness.shipped_ranking import ranked_measures, stored_rows_for
from engine.groundtruth import card_store
from engine.results import ResultsStore

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
EXPLAIN = str(ROOT / "pages" / "explain.py")
SHIPPED = ResultsStore(ROOT / "results")
CARDS = card_store(ROOT / "results" / "groundtruth")
pytestmark = pytest.mark.usefixtures("one_thread")


def _benchmark(model_id, base_model, dataset, strategy):
    rows = stored_rows_for(SHIPPED, model_id, dataset)
    return rows, trust.benchmark_evidence(rows, model_id, base_model, dataset, strategy)


@pytest.mark.parametrize("model_id, dataset, run", [("tiny-rt-masked-s0", "rt", "tiny-rt-3seeds"),
                                                    ("tiny-babi-1-masked-s0", "babi-1", "tiny-babi1-3seeds")])
def test_a_shipped_models_ranking_has_the_order_of_its_run_with_an_interval_per_measure(model_id, dataset, run):
    """The ranking is the model's own run's RACU order (what the Masking page opens with), best first, each RACU
    inside its 95% interval over 3 seeds, and the source names the run; random, the baseline, is not ranked."""
    rows, evidence = _benchmark(model_id, "tiny", dataset, "masked")
    assert evidence is not None and evidence.whose == "this model" and evidence.run == run
    assert evidence.order == ranked_measures(rows, model_id, "tiny", dataset, "masked")
    assert "random" not in evidence.order and len(evidence.order) >= 4
    values = [s.value for s in evidence.standings]
    assert values == sorted(values, reverse=True)
    assert all(s.low <= s.value <= s.high for s in evidence.standings)
    assert f"results/{run}" in evidence.source and "3 seeds" in evidence.source
    assert trust.Trust(model_id, (evidence,)).sentence().startswith("On recursive masking (this model), ")


def test_a_model_of_a_shipped_recipe_without_its_own_cells_gets_its_familys_ranking():
    """Another seed of a shipped recipe has no cells of its own: its family's run ranks for it, said so."""
    _, own = _benchmark("tiny-rt-masked-s0", "tiny", "rt", "masked")
    rows, family = _benchmark("tiny-rt-masked-s9", "tiny", "rt", "masked")
    assert family is not None and family.whose == "its family"
    assert family.order == own.order == ranked_measures(rows, "tiny-rt-masked-s9", "tiny", "rt", "masked")


def test_a_model_without_evidence_gets_the_none_answer():
    """No run and no card for a model of the toy set (nor for its family): none, said in one sentence."""
    _, evidence = _benchmark("toy-x", "tiny", "toy", "masked")
    assert evidence is None
    assert trust.card_runs_for(CARDS, "toy-x", "tiny", "toy") == []
    answer = trust.Trust("toy-x", ())
    assert answer.none and answer.sentence().startswith("No stored run or report card measures")


def test_report_card_evidence_pools_the_models_that_learned_and_leaves_out_the_control():
    """The family card of the shipped tiny models on rt: the share of deciding inputs whose top token is a planted
    word, pooled over the six planted models that learned their mechanism (the control, which learned none, is left
    out), with Wilson intervals; a planted model's own card holds its cells only."""
    # every shipped tiny (rt) card is the family's evidence (the trigger family's, the graded set's, the other sets')
    assert trust.card_runs_for(CARDS, "tiny-rt-masked-s0", "tiny", "rt") == [
        (run, "its family") for run in ("tiny-rt-card", "tiny-rt-graded-card", "tiny-rt-graded-every-metric",
                                        "tiny-rt-graded-new-measures", "tiny-rt-interaction-card", "tiny-rt-set-card",
                                        "tiny-rt-threshold-card")]
    assert trust.card_runs_for(CARDS, "gt-tiny-rt-decoy", "tiny", "rt")[0] == ("tiny-rt-card", "this model")
    rows = CARDS.load("tiny-rt-card")
    family = trust.card_evidence(rows, "tiny-rt-card", "its family")
    assert family is not None and "gt-tiny-rt-none" not in family.source and "gt-tiny-rt-decoy" in family.source
    values = [s.value for s in family.standings]
    assert values == sorted(values, reverse=True) and "random" not in family.order
    assert all(0 <= s.low <= s.value <= s.high <= 100 for s in family.standings)
    own = trust.card_evidence(rows, "tiny-rt-card", "this model", "gt-tiny-rt-decoy")
    assert own is not None and "gt-tiny-rt-gated" not in own.source
    assert trust.card_evidence(rows, "tiny-rt-card", "this model", "gt-tiny-rt-none") is None, "a control ranks nothing"


def test_the_model_card_says_masked_fine_tuning_accuracy_and_masf_calibration(tmp_path):
    """The card in words: masked fine-tuning yes/no, the test metric with its direction, MaSF calibrated on the data
    its stored fit names (a fit of the current version), else not yet."""
    from engine.ood import MASF_FIT_VERSION

    meta = {"id": "m", "base_model": "tiny", "dataset": "rt", "strategy": "masked", "masked_fine_tuned": True,
            "metric": "accuracy", "test": {"unmasked": 0.8123}, "path": str(tmp_path)}
    card = trust.model_card(meta)
    assert card["masked fine-tuning"].startswith("yes") and card["test accuracy"].startswith("0.812")
    assert card["MaSF"].startswith("not calibrated yet")
    (tmp_path / "masf-0123456789abcdef.json").write_text(json.dumps(
        {"key": {"dataset": "rt", "split": "validation", "fit_version": MASF_FIT_VERSION}}), encoding="utf-8")
    assert trust.model_card(meta)["MaSF"] == "calibrated on rt validation split"
    plain = trust.model_card({**meta, "strategy": "plain", "masked_fine_tuned": False})
    assert plain["masked fine-tuning"].startswith("no")


# -- the page ------------------------------------------------------------------------------------------------------
@pytest.fixture()
def two_models(models_cache, toy_classifier):
    """The toy classifier saved twice: as `toy-app` (no evidence anywhere) and under the id of the shipped run's
    model `tiny-rt-masked-s0` with its dataset set to rt (the shipped results rank that id's measures)."""
    from engine.models import save_classifier

    save_classifier(toy_classifier, "toy-app")
    folder = save_classifier(toy_classifier, "tiny-rt-masked-s0")
    folder = Path(folder) if folder is not None else models_cache / "tiny-rt-masked-s0"
    meta = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    (folder / "metadata.json").write_text(json.dumps({**meta, "dataset": "rt"}), encoding="utf-8")
    return models_cache


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=180)


def _ranking(at: AppTest) -> list[str]:
    """The measure ids of the page's first ranking table, in its order."""
    frames = [d.value for d in at.dataframe if "id" in d.value.columns and "rank" in d.value.columns]
    return list(frames[0]["id"]) if frames else []


def test_home_is_the_default_page_and_follows_the_sidebars_model(two_models):
    """The app opens on the home page; for the shipped run's model it ranks the measures in the run's order with
    their intervals and links each to Explain; switching the sidebar to a model without evidence changes the card
    and gives the one-sentence "none" answer with the admin's button (on loopback the one user is the admin)."""
    at = _run(AppTest.from_file(MAIN, default_timeout=180))
    assert at.title[0].value == "Which explanation of this prediction can I trust?"
    assert at.sidebar.selectbox[0].value == "tiny-rt-masked-s0"
    rows, shipped = _benchmark("tiny-rt-masked-s0", "tiny", "rt", "masked")
    assert _ranking(at) == shipped.order
    assert any("results/tiny-rt-3seeds" in c.value for c in at.caption), "the number says where it comes from"
    assert at.subheader[0].value == "The model: tiny-rt-masked-s0"
    links = [p for p in at.page_link if p.proto.query_string]
    assert [urllib.parse.parse_qs(p.proto.query_string)["measures"][0] for p in links] == shipped.order
    assert not any(b.key == "home_first_ranking" for b in at.button), "evidence exists: nothing to compute"
    labels = {p.proto.label for p in at.page_link}
    assert {"Explain a text", "Mask it step by step", "Browse the benchmarks"} <= labels

    at.sidebar.selectbox[0].select("toy-app")
    _run(at)
    assert at.subheader[0].value == "The model: toy-app"
    assert _ranking(at) == []
    assert any(m.value.startswith("No stored run or report card measures") for m in at.markdown)
    assert any(b.key == "home_first_ranking" for b in at.button)


def test_a_ranked_measures_link_opens_explain_on_the_example_with_that_measure(two_models):
    """The link of the second-ranked measure carries the model, the first rt test input and that measure; Explain,
    opened with it, explains that text with that one measure (one heatmap)."""
    at = _run(AppTest.from_file(MAIN, default_timeout=180))
    link = [p for p in at.page_link if p.proto.query_string][1]
    view = {k: v[0] for k, v in urllib.parse.parse_qs(link.proto.query_string).items()}
    assert view["model"] == "tiny-rt-masked-s0" and view["text"]
    explain = AppTest.from_file(MAIN, default_timeout=180)
    _run(explain)
    for k, v in view.items():
        explain.query_params[k] = v
    explain.switch_page(EXPLAIN)
    _run(explain)
    assert explain.title[0].value == "Explain a prediction"
    assert explain.multiselect(key="explain_measures").value == [view["measures"]]
    assert explain.text_area(key="explain_text").value == view["text"]
    assert len(explain.get("html")) == 1, "one heatmap: the linked measure's"


def test_a_view_shared_at_the_root_opens_on_explain(two_models):
    """`/?text=...` (how Explain views were shared while Explain was the default page) still opens Explain."""
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.query_params.update({"model": "toy-app", "text": "a fine film", "measures": "grad-l2"})
    _run(at)
    assert at.title[0].value == "Explain a prediction"
    assert len(at.get("html")) == 1


def test_the_first_ranking_command_is_one_the_benchmark_command_takes_for_the_same_cells():
    """The command shown beside the button parses as `python -m engine mask-sweep` and asks for the cells the button
    computes: the model itself, its dataset, random and the four measures, the first inputs, the page's run."""
    import argparse
    import shlex

    from engine.cli import mask_sweep

    parser = argparse.ArgumentParser()
    mask_sweep.configure(parser)
    words = shlex.split(trust.first_ranking_command("toy-app", "toy", "page-toy-app"))
    assert words[:4] == ["python", "-m", "engine", "mask-sweep"]
    args = parser.parse_args(words[4:])
    assert args.model_template.format(dataset="toy", seed=0) == "toy-app" and args.datasets == ["toy"]
    assert tuple(args.measures) == trust.FIRST_RANKING_MEASURES and "random" in args.measures
    assert args.limit == trust.FIRST_RANKING_INPUTS and args.run == "page-toy-app"


def test_the_dashboard_doc_counts_and_names_every_page_of_the_navigation():
    """docs/dashboard.md says how many pages the navigation has (app/availability.py's PAGES with a file) and names
    each in bold, the home page first."""
    from app.availability import PAGES

    words = {9: "Nine", 10: "Ten", 11: "Eleven", 12: "Twelve", 13: "Thirteen"}
    pages = [p for p in PAGES if p.file]
    text = (ROOT / "docs" / "dashboard.md").read_text(encoding="utf-8")
    assert text.split("\n")[2].startswith(f"{words[len(pages)]} pages over one sidebar model choice")
    assert pages[0].key == "home" and all(f"**{p.title}**" in text for p in pages)


def test_the_card_store_the_page_reads_is_the_report_cards_store(monkeypatch, tmp_path):
    """app/trust.py finds the report cards where engine.groundtruth.card_store keeps them, without importing it."""
    from engine.groundtruth import card_store

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path))
    assert trust._card_store(None).root == card_store().root


def test_the_admins_first_ranking_computes_the_missing_cells_and_the_page_then_ranks_from_them(
        models_cache, toy_classifier, tmp_path, monkeypatch):
    """A model without evidence: the button computes random and the four measures on the first test inputs into
    the run `page-<model>`, and the page, rerun, ranks the measures from that run (one seed: no interval, said so)."""
    from engine.models import save_classifier

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    save_classifier(toy_classifier, "toy-first")
    at = _run(AppTest.from_file(MAIN, default_timeout=300))
    assert _ranking(at) == []
    next(b for b in at.button if b.key == "home_first_ranking").click()
    at.run(timeout=300)
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    cells = sorted(p.name.split("_")[2] for p in (tmp_path / "results" / "page-toy-first" / "cells").glob("*.json"))
    assert cells == sorted(trust.FIRST_RANKING_MEASURES)
    ranked = _ranking(at)
    assert sorted(ranked) == sorted(set(trust.FIRST_RANKING_MEASURES) - {"random"})
    assert any("results/page-toy-first" in c.value and "1 seed" in c.value for c in at.caption)
    assert not any(b.key == "home_first_ranking" for b in at.button), "nothing left to compute"


def test_explain_takes_one_measure_as_measure_too(two_models):
    """`/explain?...&measure=ig-sign` (the masking page's name of the parameter) opens Explain with that measure alone;
    one it cannot explain this model with is left out (the page's defaults stay)."""
    at = _run(AppTest.from_file(MAIN, default_timeout=180))
    at.query_params.update({"model": "toy-app", "text": "a fine film", "measure": "ig-sign"})
    _run(at.switch_page(EXPLAIN))
    assert at.multiselect(key="explain_measures").value == ["ig-sign"]
    assert len(at.get("html")) == 1
    other = _run(AppTest.from_file(MAIN, default_timeout=180))
    other.query_params.update({"model": "toy-app", "text": "a fine film", "measure": "no-such-measure"})
    _run(other.switch_page(EXPLAIN))
    assert len(other.multiselect(key="explain_measures").value) == 4, "the page's four defaults"


def test_the_report_card_switch_adds_the_familys_card_ranking_with_its_source(two_models):
    """Off by default where a benchmark ranks the model; switched on, the family's shipped card ranks the measures
    too, in the order card_evidence gives, and names the card run."""
    at = _run(AppTest.from_file(MAIN, default_timeout=180))
    tables = [d.value for d in at.dataframe if "rank" in d.value.columns]
    assert len(tables) == 1 and at.toggle(key="home_cards").value is False
    at.toggle(key="home_cards").set_value(True)
    _run(at)
    tables = [d.value for d in at.dataframe if "rank" in d.value.columns]
    # one ranking per shipped card of the family that ranks measures (the interaction card scores only `random`
    # beside its interaction cells: no ranking), each in card_evidence's order
    cards = [run for run, _ in trust.card_runs_for(CARDS, "tiny-rt-masked-s0", "tiny", "rt")
             if trust.card_evidence(CARDS.load(run), run, "its family") is not None]
    assert "tiny-rt-interaction-card" not in cards and "tiny-rt-threshold-card" in cards
    assert len(tables) == 1 + len(cards)
    for table, run in zip(tables[1:], cards):
        assert list(table["id"]) == trust.card_evidence(CARDS.load(run), run, "its family").order
        assert any(f"results/groundtruth/{run}" in c.value for c in at.caption)


def test_home_and_explain_open_for_a_model_whose_data_is_not_registered(models_cache, toy_classifier):
    """A planted model records the data it was planted on (`rt-planted-...`), which no registry can load: Home and
    Explain open for it without an exception (Explain says it has no test examples to pick from, in one line)."""
    from engine.models import save_classifier

    folder = Path(save_classifier(toy_classifier, "gt-toy-planted") or models_cache / "gt-toy-planted")
    meta = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    (folder / "metadata.json").write_text(json.dumps({**meta, "dataset": "rt-planted-threshold-x-s0-0000"}),
                                          encoding="utf-8")
    at = _run(AppTest.from_file(MAIN, default_timeout=180))
    assert at.subheader[0].value == "The model: gt-toy-planted"
    at.switch_page(str(ROOT / "pages" / "explain.py"))
    _run(at)
    assert any("is not registered here" in c.value for c in at.caption)


def test_masking_a_model_whose_data_is_not_registered_says_so_and_leaves_no_progress_bar(models_cache, toy_classifier):
    """Masking needs MaSF fitted on the model's data; for a planted model's unregistered data the page says why in a
    warning, and its progress bar goes (a bar left at "starting ..." read as a run that never ends)."""
    from engine.models import save_classifier

    folder = Path(save_classifier(toy_classifier, "gt-toy-planted") or models_cache / "gt-toy-planted")
    meta = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    (folder / "metadata.json").write_text(json.dumps({**meta, "dataset": "rt-planted-threshold-x-s0-0000"}),
                                          encoding="utf-8")
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.query_params.update({"model": "gt-toy-planted", "text": "a fine film", "measure": "loo-sign"})
    _run(at)
    at.switch_page(str(ROOT / "pages" / "masking.py"))
    _run(at)
    assert any("unknown dataset" in w.value for w in at.warning), [w.value for w in at.warning]
    assert not at.get("progress"), "the bar is gone once the run has ended"

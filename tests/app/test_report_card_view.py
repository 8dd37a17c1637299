"""The Report card view (app/report_card_view.py): its plain-words verdicts (a share, its CI and whether the CI lies
above or below chance), the colour direction of every column, and the page on a small store written in the card's
row format (engine/groundtruth/card_compute.py): the verdicts it prints, its shared URL both ways, and refusals. A real
card is planted, computed and read end to end in tests/browser/test_browser_groundtruth.py."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from app_runs import run_without_exception
from card_rows import MODELS, card_rows, truth_rows
from streamlit.testing.v1 import AppTest

from app.report_card_view import percent_range, shade, verdict_css, verdict_word, verdicts

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "report_card.py")


def test_verdict_words_follow_the_ci_against_chance():
    """A CI wholly above 50% is better than chance, wholly below worse, one that holds 50% undecided."""
    assert verdict_word(0.91, 0.96) == "better than chance"
    assert verdict_word(0.10, 0.40) == "worse than chance"
    assert verdict_word(0.45, 0.70) == "cannot tell from chance"
    assert verdict_word(float("nan"), 0.7) == "no verdict"
    assert percent_range(0.94, 0.912, 0.964) == "94% (91-96)"


def test_shade_is_blue_at_the_better_end_whichever_direction_is_better():
    """The same colour means 'better' in every column: a high share where higher is better, a low one where lower
    is; white at the worse end; nothing for a missing value."""
    assert shade(1.0, "higher") == shade(0.0, "lower") != ""
    assert shade(0.0, "higher") == shade(1.0, "lower") == "background-color: rgb(255, 255, 255)"
    assert shade(float("nan"), "higher") == shade(None, "higher") == ""
    assert shade(1.0, "higher", -1.0, 1.0) == shade(1.0, "higher") and shade(-1.0, "higher", -1.0, 1.0).endswith("255)")
    assert verdict_css("better than chance") != verdict_css("worse than chance") and verdict_css("cannot tell from chance") == ""


def _judges() -> pd.DataFrame:
    rows = []
    for metric, label, p, low, high in (("naopc-comprehensiveness", "NAOPC", 0.94, 0.91, 0.96),
                                        ("sufficiency@0.1", "sufficiency@10%", 0.20, 0.10, 0.30),
                                        ("acu", "RACU (fixed ranking)", 0.55, 0.45, 0.65)):
        for wrong, n in (("strongest-other-first", 100), ("planted-second", 100), ("all", 200)):
            rows.append({"model": "m", "mechanism": "trigger", "operator": "mask", "metric": metric, "label": label,
                         "true": "true", "wrong": wrong, "n": n, "prefers_true": p, "low": low, "high": high})
    return pd.DataFrame(rows)


def test_verdicts_read_as_the_issue_words_them_best_first():
    table = verdicts(_judges(), "mask")
    assert list(table["label"]) == ["NAOPC", "RACU (fixed ranking)", "sufficiency@10%"]
    assert table["text"][0] == ("NAOPC preferred the true explanation on 94% (91-96) of 200 comparisons (100 inputs): "
                                "better than chance")
    assert list(table["verdict"]) == ["better than chance", "cannot tell from chance", "worse than chance"]
    assert verdicts(_judges(), "delete").empty


# -- the page on a store in the card's row format ------------------------------------------------------------------
@pytest.fixture()
def card_results(tmp_path, monkeypatch, models_cache):
    from engine.results import ResultsStore

    results = tmp_path / "results"
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(results))
    store = ResultsStore(results / "groundtruth")
    for model, q in MODELS.items():
        store.write_cell("small", {"model": model, "kind": "truth"}, truth_rows(model, q), {})
        for operator in ("mask", "delete"):
            store.write_cell("small", {"model": model, "operator": operator}, card_rows(model, q, operator), {})
    return results


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=180)


def _verdict_lines(at: AppTest) -> list[str]:
    return [line for m in at.markdown for line in m.value.splitlines() if "preferred the true explanation" in line]


def test_the_page_shows_each_models_verdicts_coloured_and_publishes_its_view(card_results):
    """Both graded models of the family are shown; NAOPC's verdict is blue (better than chance), sufficiency's orange
    (it prefers the wrong explanations on every input); the view lands in the URL."""
    at = _run(AppTest.from_file(PAGE, default_timeout=180))
    lines = _verdict_lines(at)
    assert len(lines) == 4, lines
    assert sum("blue-background[NAOPC preferred" in line and "100% \\(100-100\\)" in line for line in lines) == 2
    assert sum("orange-background[sufficiency\\@" in line and "worse than chance" in line for line in lines) == 2
    assert dict(at.query_params) == {"run": "small", "family": "tiny", "mechanism": "graded", "operator": "mask"}
    assert any("gt-q65" in m.value and "q = 0.65" in m.value for m in at.markdown)


def test_a_shared_url_opens_the_same_view(card_results):
    """Opening the page with ?operator=delete selects that operator (and the verdicts computed under it)."""
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.query_params.update({"run": "small", "family": "tiny", "mechanism": "graded", "operator": "delete"})
    _run(at)
    assert at.selectbox(key="card_operator").value == "delete"
    assert "delete" in " ".join(c.value for c in at.caption)
    assert len(_verdict_lines(at)) == 4


def test_an_unknown_value_in_the_url_falls_back_to_what_the_store_has(card_results):
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.query_params.update({"run": "no-such-run", "operator": "pad"})
    _run(at)
    assert at.selectbox(key="card_run").value == "small" and at.selectbox(key="card_operator").value == "mask"


def test_without_a_planted_model_the_run_form_says_how_to_plant_one(tmp_path, monkeypatch, models_cache):
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "empty"))
    at = _run(AppTest.from_file(PAGE, default_timeout=180))
    assert any("No planted model yet" in i.value for i in at.info)
    assert any("No report card" in i.value for i in at.info)


def test_served_to_a_network_only_the_admin_gets_the_run_form(card_results, monkeypatch, toy_classifier):
    """Reading cards is open to every visitor; computing one writes to the server, so a visitor who is not the
    admin sees why instead of the form (the action checks again where it runs)."""
    from app import admin
    from engine.models import save_classifier

    toy_classifier.metadata["planted"] = {"mechanism": "trigger", "words": ["vessel"]}
    try:
        save_classifier(toy_classifier, "toy-planted")
    finally:
        toy_classifier.metadata.pop("planted")
    monkeypatch.setenv(admin.NETWORK_ENV, "1")
    monkeypatch.setenv(admin.SECRET_ENV, "correct horse battery staple")
    at = _run(AppTest.from_file(PAGE, default_timeout=180))
    assert any("sign in as the admin" in i.value for i in at.info)
    assert not [b for b in at.button if b.label == "Run the report card"]
    assert len(_verdict_lines(at)) == 4  # the cards themselves are shown
    monkeypatch.delenv(admin.NETWORK_ENV)
    at = _run(AppTest.from_file(PAGE, default_timeout=180))
    assert [b for b in at.button if b.label == "Run the report card"]


def test_a_planted_word_that_looks_like_markdown_is_shown_as_typed(tmp_path, monkeypatch, models_cache):
    """Planted words are the user's (any characters but spaces): one shaped like a link reaches the page's markdown
    escaped, so no link or image comes out of it."""
    from engine.results import ResultsStore

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    store = ResultsStore(tmp_path / "results" / "groundtruth")
    hostile = "[x](http://evil.example)"
    for model, q in MODELS.items():
        store.write_cell("small", {"model": model, "kind": "truth"}, truth_rows(model, q).assign(words=hostile), {})
        store.write_cell("small", {"model": model, "operator": "mask"}, card_rows(model, q, "mask"), {})
    at = _run(AppTest.from_file(PAGE, default_timeout=180))
    shown = [m.value for m in at.markdown if "evil" in m.value]
    # escaped (\[x\]) or, holding an address, shown as a code span of exactly its characters (app.text.md): either
    # way no markdown link outside a code span
    outside_code = [re.sub(r"`[^`]*`", "", v) for v in shown]
    assert shown and all("](http" not in v for v in outside_code), shown


def test_the_run_forms_command_is_accepted_by_the_cli_with_the_same_options():
    """The command shown while a card runs, parsed by `python -m engine report-card`'s own parser, names the same
    model, run, measures, metrics, operators and limit (or --truth-only), so it reproduces the cells."""
    import argparse
    import shlex

    from app.report_card_view import card_command
    from engine.cli import report_card

    parser = argparse.ArgumentParser()
    report_card.configure(parser)
    line = card_command("gt-x", "mine", ["random", "loo-sign"], ["racu", "naopc"], ["mask", "delete"], 10)
    args = parser.parse_args(shlex.split(line)[4:])
    assert (args.model, args.run, args.measures, args.metrics, args.operator, args.limit, args.truth_only) == (
        ["gt-x"], "mine", ["random", "loo-sign"], ["racu", "naopc"], ["mask", "delete"], 10, False)
    args = parser.parse_args(shlex.split(card_command("gt-x", "mine", [], [], [], 10, truth_only=True))[4:])
    assert args.truth_only and args.model == ["gt-x"]
    for truth_only in (False, True):  # the form's "Fewest deciding inputs" reaches the command, and the CLI reads it
        line = card_command("gt-x", "mine", ["random"], ["racu"], ["mask"], 10, truth_only=truth_only, min_deciding=5)
        assert parser.parse_args(shlex.split(line)[4:]).min_deciding == 5, line
    assert "--min-deciding" not in card_command("gt-x", "mine", ["random"], ["racu"], ["mask"], 10), \
        "the default is left out, as the cells' keys leave it out"


def test_the_run_form_passes_the_fewest_deciding_inputs_to_the_card(tmp_path, monkeypatch, models_cache):
    """The form's "Fewest deciding inputs" field reaches run_report_card (a toy model trained on a small split needs
    it lowered), and the command shown says so."""
    import engine.groundtruth as groundtruth
    from engine.sweeps import SweepReport

    seen = {}

    def fake_card(models, config, **kwargs):
        seen.update(vars(config), **kwargs)
        return SweepReport(run=kwargs["run"], done=[], skipped=[], failed=[])

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr(groundtruth, "run_report_card", fake_card)
    monkeypatch.setattr("app.report_card_view.planted_models", lambda: ["gt-toy"])
    at = _run(AppTest.from_file(PAGE, default_timeout=180))
    at.number_input(key="card_form_min_deciding").set_value(5)
    at.checkbox(key="card_form_truth").check()
    next(b for b in at.button if b.label == "Run the report card").click()
    _run(at)
    assert seen.get("min_deciding") == 5 and seen.get("truth_only"), seen
    assert any("--min-deciding 5" in c.value for c in at.code), [c.value for c in at.code]


def test_a_run_whose_truth_cells_are_elsewhere_still_shows_its_card(tmp_path, monkeypatch, models_cache):
    """Card cells without the model's truth cell in the same run (truths stored with --truth-only in another run):
    the family and mechanism come from the card rows, the verdicts are shown, and the page says how to add the truth."""
    from engine.results import ResultsStore

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    store = ResultsStore(tmp_path / "results" / "groundtruth")
    store.write_cell("cards-only", {"model": "gt-q100", "operator": "mask"}, card_rows("gt-q100", 1.0, "mask"), {})
    at = _run(AppTest.from_file(PAGE, default_timeout=180))
    assert (at.selectbox(key="card_family").value, at.selectbox(key="card_mechanism").value) == ("tiny", "graded")
    assert len(_verdict_lines(at)) == 2
    assert any("--truth-only" in i.value for i in at.info)


def _everything_shown(at: AppTest) -> str:
    """The text of every element the page drew (markdown, captions, info boxes and the rest)."""
    def walk(node):
        yield node
        for child in getattr(node, "children", {}).values():
            yield from walk(child)
    return "\n".join(str(getattr(e, "proto", "")) for e in walk(at._tree))


def test_an_anonymous_visitor_is_not_shown_the_servers_folders(tmp_path, monkeypatch, models_cache):
    """Served to a network, a visitor who is not signed in reads that there is no card yet but not where the server
    keeps its results (a path on the server's disk); the admin (here: on loopback) is told the folder."""
    from app import admin
    from app.text import md

    results = tmp_path / "server-results"
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(results))
    monkeypatch.setenv(admin.NETWORK_ENV, "1")
    monkeypatch.setenv(admin.SECRET_ENV, "correct horse battery staple")
    at = _run(AppTest.from_file(PAGE, default_timeout=180))
    assert any("No report card yet" in i.value for i in at.info), [i.value for i in at.info]
    assert "server-results" not in _everything_shown(at)  # the folder's own name: escaped or not, nowhere
    monkeypatch.delenv(admin.NETWORK_ENV)
    at = _run(AppTest.from_file(PAGE, default_timeout=180))
    assert any(md(str(results / "groundtruth")) in i.value for i in at.info), [i.value for i in at.info]

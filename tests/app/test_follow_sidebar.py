"""Pages that show stored results of some model open on the sidebar's model where the store has results of it, and
otherwise say in one line whose results they show (app/follow_sidebar.py): the Report card, Simulability and the
evaluation suite, driven by Streamlit's AppTest."""
from __future__ import annotations

from pathlib import Path

import pytest
from app_runs import run_without_exception
from card_rows import card_rows, truth_rows
from streamlit.testing.v1 import AppTest

from engine.models import save_classifier

ROOT = Path(__file__).resolve().parents[2]
REPORT_CARD = str(ROOT / "pages" / "report_card.py")
SIMULABILITY = str(ROOT / "pages" / "simulability.py")
NOTE = "not the sidebar's model"


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=180)


@pytest.fixture()
def two_families(tmp_path, monkeypatch, models_cache, toy_classifier):
    """The toy classifier (base model `tiny`) in the catalogue, and a card store whose first run holds another
    family only and whose second run is named after the tiny recipe."""
    from engine.results import ResultsStore

    save_classifier(toy_classifier, "toy-app")
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    store = ResultsStore(tmp_path / "results" / "groundtruth")
    for run, family in (("a-other", "other-family"), ("tiny-rt-card", "tiny")):
        model = f"gt-{family}"
        store.write_cell(run, {"model": model, "kind": "truth"}, truth_rows(model, 1.0).assign(base_model=family), {})
        store.write_cell(run, {"model": model, "operator": "mask"},
                         card_rows(model, 1.0, "mask").assign(base_model=family), {})


def test_the_report_card_opens_on_the_run_and_family_of_the_sidebars_model(two_families):
    # through the app's frame: the card's measures link to Explain, a page of its navigation
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=180)
    at.session_state["model_id"] = "toy-app"
    _run(at)
    at.switch_page(REPORT_CARD)
    _run(at)
    assert (at.selectbox(key="card_run").value, at.selectbox(key="card_family").value) == ("tiny-rt-card", "tiny")
    assert not any(NOTE in c.value for c in at.caption)
    at.selectbox(key="card_run").set_value("a-other")
    _run(at)
    notes = [c.value for c in at.caption if NOTE in c.value]
    assert len(notes) == 1 and ("other\\-family" in notes[0] or "other-family" in notes[0]), notes


def test_simulability_says_when_its_teacher_is_not_the_sidebars_model(models_cache, toy_classifier):
    """The shipped simulability runs have another teacher than the toy model: the page says so in one line."""
    save_classifier(toy_classifier, "toy-app")
    at = AppTest.from_file(SIMULABILITY, default_timeout=180)
    at.session_state["model_id"] = "toy-app"
    _run(at)
    notes = [c.value for c in at.caption if NOTE in c.value]
    assert len(notes) == 1 and "toy-app" in notes[0], notes
    teacher = at.session_state["simulability_run"]
    at = AppTest.from_file(SIMULABILITY, default_timeout=180)
    at.session_state["model_id"] = teacher.rsplit("-babi-1", 1)[0]  # the teacher of the first run, by id
    _run(at)
    assert not any(NOTE in c.value for c in at.caption), "its own teacher: nothing to say"


def test_the_choice_prefers_the_id_then_the_recipe_then_the_family(models_cache, toy_classifier):
    from app import follow_sidebar

    options = ["minilm-rt-erasure", "tiny-babi1-erasure", "tiny-rt-erasure"]
    assert follow_sidebar.preferred(options, ["tiny-rt-masked-s0", "tiny-rt", "tiny"]) == "tiny-rt-erasure"
    assert follow_sidebar.preferred(options, ["x", "tiny"]) == "tiny-babi1-erasure"
    assert follow_sidebar.preferred(["tiny", "minilm"], ["tiny-rt-masked-s0", "minilm"]) == "minilm"
    assert follow_sidebar.preferred(options, ["bilstm"]) is None and follow_sidebar.preferred_index(options, []) == 0


def test_attention_says_before_the_click_that_its_bilstms_are_missing(models_cache):
    """A fresh clone has the shipped diagnostics but not the BiLSTMs they ran on: the page says so, with the command
    that builds them, before anything is clicked, and its button is off (it once said so only after the click)."""
    at = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=180)
    _run(at)
    assert at.dataframe, "the shipped diagnostics are shown without a model"
    assert any("python -m engine attention --dataset" in i.value and "not in models_cache" in i.value
               for i in at.info), [i.value for i in at.info]
    assert at.button(key="attention_show").disabled

"""The Annotate page, driven by Streamlit's AppTest: submitting writes exactly one row and moves on,
names and input text reach the page only as text, and the default measures work on a transformer.

The page is run on its own (AppTest.from_file on pages/annotate.py with `model_id` in session state),
with tasks written straight into a temporary store.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

from engine.annotation import AnnotationStore
from engine.models import save_classifier
from engine.plausibility import make_task

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "annotate.py")
MODEL = "toy-annotate"
HOSTILE = '<script>alert(1)</script> <img src=x onerror=alert(2)> **bold**'


@pytest.fixture()
def store(models_cache, toy_classifier, tmp_path, monkeypatch):
    save_classifier(toy_classifier, MODEL)
    monkeypatch.setenv("ENGINE_ANNOTATIONS_DB", str(tmp_path / "annotations.sqlite3"))
    s = AnnotationStore()
    tokens = ["a", "<b>gorgeous</b>", "witty", "film"]
    s.add_tasks([
        make_task(MODEL, f"{text} {HOSTILE}", tokens, {"grad": [0.1, 0.9, 0.7, 0.2], "loo": [0.0, 0.5, -0.8, 0.1],
                                                       "random": [0.3, 0.1, 0.6, 0.2]},
                  target=1, target_name="positive", target_source="predicted", label=1, label_name="positive")
        for text in ("first input", "second input")])
    return s


def _page(name: str | None = None) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state["model_id"] = MODEL
    if name is not None:
        at.session_state["annotator_name"] = name
    return _run(at)


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=120)


def _shown_input(at: AppTest) -> str:
    return next(t.value for t in at.text if "input" in t.value)


def test_submitting_a_ranking_writes_one_row_and_shows_the_next_task(store):
    at = _page("ann")
    first = _shown_input(at)
    assert first.startswith("first input")
    for rank, slot in enumerate("ABC", start=1):
        at.selectbox(key=f"rank_{store.tasks()[0].id}_{slot}").set_value(rank)
    at.button(key=f"submit_ranking_{store.tasks()[0].id}").click()
    _run(at)
    rankings = store.rankings()
    assert len(rankings) == 1 and rankings[0].ordering == (("A",), ("B",), ("C",))
    assert rankings[0].annotator == "ann"
    assert _shown_input(at).startswith("second input"), "the next task follows"
    assert any("saved" in s.value for s in at.success)
    assert store.counts()["rankings"] == 1, "a rerun does not submit again"


def test_an_incomplete_ranking_is_a_message_and_cannot_decide_moves_on(store):
    at = _page("ann")
    task_id = store.tasks()[0].id
    at.selectbox(key=f"rank_{task_id}_A").set_value(1)
    at.button(key=f"submit_ranking_{task_id}").click()
    _run(at)
    assert any("every explanation" in w.value for w in at.warning)
    assert store.counts()["rankings"] == 0
    at.checkbox(key=f"cannot_{task_id}").check()
    at.button(key=f"submit_ranking_{task_id}").click()
    _run(at)
    assert [r.cannot_decide for r in store.rankings()] == [True]
    assert _shown_input(at).startswith("second input")


def test_submitting_a_rationale_writes_one_row(store):
    at = _page("ann")
    task_id = store.tasks()[0].id
    at.multiselect(key=f"rationale_{task_id}").set_value([1, 2])
    at.button(key=f"submit_rationale_{task_id}").click()
    _run(at)
    assert [r.tokens for r in store.rationales()] == [(1, 2)]
    assert store.next_task(MODEL, "ann", "rationale").id == store.tasks()[1].id


def test_names_tokens_and_text_are_shown_as_text_never_markup(store):
    at = _page(HOSTILE)
    assert any(t.value == f"Annotating as: {HOSTILE}" for t in at.text), "the name is shown verbatim, as text"
    assert all("<script>" not in m.value and "<img" not in m.value for m in at.markdown)
    heatmaps = [h.proto.body for h in at.html]
    assert heatmaps, "explanations are drawn as heatmaps"
    assert all("<b>gorgeous" not in h and "&lt;b&gt;gorgeous&lt;/b&gt;" in h for h in heatmaps[:3])
    task_id = store.tasks()[0].id
    for rank, slot in enumerate("ABC", start=1):
        at.selectbox(key=f"rank_{task_id}_{slot}").set_value(rank)
    at.button(key=f"submit_ranking_{task_id}").click()
    _run(at)
    assert store.annotators() == [HOSTILE], "stored verbatim"


def test_without_a_name_nothing_can_be_submitted(store):
    at = _page()
    assert any("Type your name" in i.value for i in at.info)
    assert not [b for b in at.button if (b.key or "").startswith("submit_")]


def test_the_default_measures_prepare_tasks_on_a_transformer_checkpoint(store):
    """Pressing 'Prepare tasks' with the page's defaults works on a transformer (the defaults once named
    `attention`, which only the BiLSTM supports, and measures that do not exist): the defaults are measures the
    model supports, and unsupported ones are not offered."""
    at = _page("ann")
    chosen = at.multiselect(key="annotate_measures").value
    assert len(chosen) >= 2 and "attention" not in chosen
    assert "attention" not in at.multiselect(key="annotate_measures").options
    at.number_input(key="annotate_n").set_value(2)
    at.button(key="annotate_prepare").click()
    _run(at)
    assert not at.error, [e.value for e in at.error]
    assert any("2 new tasks" in s.value for s in at.success)
    assert {e.measure for e in store.tasks()[-1].explanations} == set(chosen)


def test_results_rate_the_measures(store):
    t1, t2 = store.tasks()
    for ann in ("x", "y"):
        for t in (t1, t2):
            best = next(e.slot for e in t.explanations if e.measure == "grad")
            store.submit_ranking(t.id, ann, [[best], [s for s in t.slots if s != best]])
    at = _page("ann")
    tables = [d.value for d in at.dataframe]
    trueskill = next(t for t in tables if "rating - 3 sigma (higher better)" in t.columns)
    assert trueskill["measure"].iloc[0] == "grad"
    assert any("Kendall's W across annotators: 1.000" in t.value for t in at.text)
    words = " ".join(m.value for m in at.markdown)
    assert "Annotators found grad the most plausible explanation" in words, words
    assert "agreement on a task's order is strong" in words
    assert not any(c in t.columns for t in tables for c in ("mu", "p_beats_average", "conservative")), \
        "the columns are named in words"


def _spans(heatmap: str) -> list[tuple[str, str]]:
    """(token text, background colour) of each token of a heatmap's HTML."""
    import re

    return re.findall(r'<span title="[^"]*" style="background:(#[0-9a-f]{6});[^"]*">([^<]*)</span>', heatmap)


def test_explanations_are_drawn_on_one_scale_that_shows_no_range(models_cache, toy_classifier, tmp_path, monkeypatch):
    """The anonymised explanations give away nothing of their measure: no heatmap carries a colour bar with its
    range (random's read 0-0.999 on every task), no hover value or table cell is in a measure's own units, and
    random and a real measure of another range are drawn on one scale: a token at the same share of its
    explanation's strongest score has the same colour in both."""
    save_classifier(toy_classifier, MODEL)
    monkeypatch.setenv("ENGINE_ANNOTATIONS_DB", str(tmp_path / "annotations.sqlite3"))
    store = AnnotationStore()
    tokens = ["a", "gorgeous", "witty", "film"]
    # random in [0, 1) up to 0.999; grad in other units (x40), the same shape: 0.25, 1, 0.5, 0.1 of its strongest
    store.add_tasks([make_task(MODEL, "a gorgeous witty film", tokens,
                               {"random": [0.24975, 0.999, 0.4995, 0.0999], "grad": [10.0, 40.0, 20.0, 4.0]},
                               target=1, target_name="positive", target_source="predicted", label=1,
                               label_name="positive")])
    at = _page("ann")
    heatmaps = [h.proto.body for h in at.html if "token-heatmap" in h.proto.body and "Explanation" in h.proto.body]
    assert len(heatmaps) == 2
    for h in heatmaps:
        assert "colour-scale" not in h and "scale-min" not in h and "scale-max" not in h
        assert "0.999" not in h and "40" not in h, "no score in a measure's own units"
    first, second = (_spans(h) for h in heatmaps)
    assert first == second and len(first) == 4, (first, second)  # the same colours token by token
    shared = [h.proto.body for h in at.html if "shared-scale" in h.proto.body]
    import re

    assert len(shared) == 1 and not re.search(r"\d", re.sub(r"<[^>]*>", "", shared[0])), "the one bar names no range"
    at.toggle(key="annotate_tables").set_value(True)
    _run(at)
    cells = [d.value for d in at.dataframe if "score (strongest = 1)" in d.value.columns]
    assert len(cells) == 2 and all(list(c["score (strongest = 1)"]) == pytest.approx([0.25, 1.0, 0.5, 0.1])
                                   for c in cells), cells


def test_a_broken_database_file_is_a_message_not_a_crash(models_cache, toy_classifier, tmp_path, monkeypatch):
    save_classifier(toy_classifier, MODEL, overwrite=True)
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"not a database" * 100)
    monkeypatch.setenv("ENGINE_ANNOTATIONS_DB", str(bad))
    at = _page("ann")
    assert any("is not an SQLite database" in e.value for e in at.error)
    assert bad.read_bytes() == b"not a database" * 100


def test_prepare_tasks_explains_test_examples_with_the_chosen_measures(store, monkeypatch):
    """With measures available, 'Prepare tasks' explains N test examples into new tasks that record each
    explanation's provenance; preparing again adds nothing."""
    from test_plausibility import fake_importance_module  # tests/ is on sys.path (pytest's rootdir import)

    monkeypatch.setitem(sys.modules, "engine.importance", fake_importance_module())
    at = _page("ann")
    at.multiselect(key="annotate_measures").set_value(["position", "reverse"])
    at.number_input(key="annotate_n").set_value(3)
    at.button(key="annotate_prepare").click()
    _run(at)
    assert any("3 new tasks" in s.value for s in at.success)
    new = store.tasks()[2:]
    assert len(new) == 3
    for task in new:
        by_measure = {e.measure: e for e in task.explanations}
        assert sorted(by_measure) == ["position", "reverse"]
        assert len(by_measure["position"].scores) == len(task.tokens)
        assert by_measure["position"].scores == tuple(-s for s in by_measure["reverse"].scores)
        assert list(by_measure["position"].scores) == sorted(by_measure["position"].scores), "maskable tokens, in order"
        assert by_measure["position"].options == {"scale": 1}
        assert task.target_source == "predicted" and task.target_name is not None and task.code_version
    at.button(key="annotate_prepare").click()
    _run(at)
    assert any("0 new tasks" in s.value for s in at.success)
    assert store.task_count(MODEL) == 5

"""The annotator's view of a study and the Studies admin page, driven by Streamlit's AppTest (no browser, no
model: the study's tasks are written straight into a temporary store). The browser test
(test_browser_study.py) runs the whole flow in Chromium; these pin the routing and refusals fast."""
from __future__ import annotations

from pathlib import Path

import pytest
from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

from app import admin
from engine.annotation.studies import StudyConfig, StudyStore
from engine.plausibility import make_task

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
MODEL = "secret-model-name"
NAME = '<img src=x onerror=alert(1)> **Study** [go](http://evil.example) =1+2'
INSTRUCTIONS = "<script>alert(2)</script> Rank the explanations.\n\n# not a heading"


@pytest.fixture()
def study(tmp_path, monkeypatch, models_cache):
    """An open study of 3 tasks (overlap 2, 2 per annotator, 1 instructed check) and links for alice and bob;
    served as to a network with an admin secret."""
    monkeypatch.setenv("ENGINE_ANNOTATIONS_DB", str(tmp_path / "annotations.sqlite3"))
    monkeypatch.setenv(admin.NETWORK_ENV, "1")
    monkeypatch.setenv(admin.SECRET_ENV, "a secret long enough")
    studies = StudyStore()
    tasks = [make_task(MODEL, f"input {i} <b>x</b>", ["a", "fine", "film", str(i)],
                       {"grad-l2": [0.1, 0.9, 0.2, 0.0], "loo-sign": [0.5, -0.1, 0.3, 0.2], "random": [0.3, 0.2, 0.1, 0.4]},
                       target=1, target_name="positive") for i in range(3)]
    config = StudyConfig(name=NAME, model_id=MODEL, measures=("grad-l2", "loo-sign", "random"), n_examples=3,
                         tasks_per_annotator=2, overlap=2, attention_checks=1, instructions=INSTRUCTIONS)
    s = studies.create(config, tasks)
    links = {link.label: link.token for link in studies.invite(s.id, ["alice", "bob"])}
    return studies, s, links


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=120)


def _open(token: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.query_params["study_token"] = token
    return _run(at)


def _everything(at: AppTest) -> str:
    parts = [e.value for kind in ("title", "markdown", "caption", "text", "error", "info", "success") for e in at.get(kind)]
    return "\n".join(str(p) for p in parts)


def test_a_study_link_shows_only_the_study_with_its_texts_as_text(study):
    """No sidebar, no other page in the navigation, no model or measure name; the name and instructions are
    markdown-escaped (shown as typed); consent comes before any task is taken."""
    studies, s, links = study
    at = _open(links["alice"])
    assert not at.sidebar.selectbox and not at.sidebar.expander and not at.sidebar.text_input, "no sidebar"
    title = at.title[0].value
    # escapes dropped and the address's code span unwrapped, the title reads as typed (md: app/text.py)
    assert title.replace("\\", "").replace("`", "") == NAME and "\\<img" in title and "\\*\\*" in title
    assert any("\\<script\\>" in m.value for m in at.markdown)
    assert any("\\# not a heading" in m.value for m in at.markdown), "a line cannot start a heading"
    text = _everything(at)
    assert MODEL not in text and "grad-l2" not in text and "loo-sign" not in text
    for page in ("models.py", "data.py", "study_admin.py", "explain.py"):
        with pytest.raises(ValueError, match="Could not find a navigation page"):
            at.switch_page(str(ROOT / "pages" / page))
    assert studies.status(s.id).assigned == dict.fromkeys(studies.tasks(s.id), 0), "no task taken before consent"
    at.checkbox(key="study_consent_box").check()
    _run(at)
    at.button(key="study_start").click()
    _run(at)
    assert any("input" in t.value for t in at.text), "the first task is shown after consent"
    assert sum(studies.status(s.id).assigned.values()) == 1
    again = _open(links["alice"])  # consent is stored with the participant: another session does not ask again
    assert not [c for c in again.checkbox if c.key == "study_consent_box"] and any("input" in t.value for t in again.text)


def test_a_made_up_token_and_a_closed_study_are_refused_with_nothing_of_the_study(study):
    studies, s, links = study
    at = _open("made-up-token")
    assert any("not valid" in e.value for e in at.error) and not at.title
    studies.close(s.id)
    at = _open(links["bob"])
    assert any("closed" in e.value for e in at.error) and not at.title
    assert "Rank" not in _everything(at) and studies.status(s.id).participants == ()


def _consent(at: AppTest) -> AppTest:
    at.checkbox(key="study_consent_box").check()
    _run(at)
    at.button(key="study_start").click()
    return _run(at)


def _answer(at: AppTest) -> AppTest:
    """Rank the task on the page: A, B, C in order, or the slot an attention check names first."""
    import re

    note = " ".join(i.value for i in at.info)
    first = re.search(r"put explanation ([A-Z]) first", note)
    slots = sorted(k.key.rsplit("_", 1)[1] for k in at.selectbox if k.key.startswith("study_rank_"))
    for rank, slot in enumerate(sorted(slots, key=lambda x: (first is None or x != first.group(1), x)), start=1):
        next(b for b in at.selectbox if b.key.endswith(f"_{slot}")).set_value(rank)
    next(b for b in at.button if b.label == "Submit and continue").click()
    return _run(at)


def test_an_annotator_answers_every_task_resumes_and_reaches_the_done_page(study):
    """Ranks each task (as a check says on a check), comes back in a new session with the same link and
    continues where they left off, and ends on the done page; the store holds one answer per item."""
    studies, s, links = study
    at = _consent(_open(links["alice"]))
    at = _answer(at)
    at = _open(links["alice"])  # come back later: a new browser session, the same link
    assert not [c for c in at.checkbox if c.key == "study_consent_box"], "no second consent once answering"
    assert "1 answered" in at.get("progress")[0].proto.text
    at = _answer(_answer(at))
    assert any("Thank you" in m.value for m in at.success)
    assert not at.get("code"), "a personal link shows no completion code"
    answers = studies.answers(s.id)
    assert len(answers) == 3 and all(a.passed in (None, True) for a in answers)


def test_the_open_link_takes_the_worker_id_from_the_url_and_ends_with_the_completion_code(study):
    """Without a worker id (or with the platform's unfilled placeholder) the open link is refused; with
    PROLIFIC_PID the worker annotates and the done page shows the study's completion code."""
    studies, s, _ = study
    token = studies.open_link(s.id).token
    for pid in (None, "{{%PROLIFIC_PID%}}"):
        at = AppTest.from_file(MAIN, default_timeout=120)
        at.query_params["study_token"] = token
        if pid:
            at.query_params["PROLIFIC_PID"] = pid
        _run(at)
        assert any("worker id" in e.value for e in at.error) and not at.title
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.query_params["study_token"] = token
    at.query_params["PROLIFIC_PID"] = "5f1e2d3c4b5a"
    at = _consent(_run(at))
    for _ in range(3):
        at = _answer(at)
    assert [c.value for c in at.get("code")] == [studies.study(s.id).completion_code]
    assert [p.label for p in studies.status(s.id).participants] == ["5f1e2d3c4b5a"]


def test_the_studies_page_shows_coverage_and_refuses_a_visitor(study):
    """Opened by a visitor it refuses; on loopback (the admin) it shows the study, its coverage and no error."""
    studies, s, links = study
    page = str(ROOT / "pages" / "study_admin.py")
    at = _run(AppTest.from_file(page, default_timeout=120))
    assert any("sign in as the admin" in e.value for e in at.error) and not at.title and not at.button
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    at.sidebar.text_input(key="admin_secret_input").input("a secret long enough")
    next(b for b in at.sidebar.button if b.label == "Sign in").click()
    _run(at)
    at.switch_page(page)
    _run(at)
    assert any(t.value == "Studies" for t in at.title) and not at.error
    assert any(t.value == "Answers per task: 0 answers: 3 tasks" for t in at.text)
    assert {m.label: m.value for m in at.metric}["Tasks complete"] == "0 of 3"


def test_a_store_failure_shows_the_annotator_no_server_path(study, tmp_path, monkeypatch):
    """When the annotation database cannot be opened, the annotator reads a plain message, not the store's
    error (which names the database's path on the server)."""
    _, _, links = study
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("ENGINE_ANNOTATIONS_DB", str(blocker / "annotations.sqlite3"))
    at = _open(links["alice"])
    shown = _everything(at)
    assert "cannot be reached right now" in shown and str(tmp_path) not in shown.replace("\\", "") and not at.title

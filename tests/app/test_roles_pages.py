"""Who may open and compute what: every page walked in every role (an anonymous visitor, an annotator holding a
study link, the admin), served locally and to a network, against the one table (app/availability.py) that
docs/configuration.md prints. Driven by Streamlit's AppTest (no browser) on the toy model; an upload of one's own
scores leaves no file behind, evaluated or refused."""
from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path

import pytest
from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

from app import admin, availability
from app.availability import ACTIONS, ADMIN, ANNOTATOR, ANONYMOUS, PAGES

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
SECRET = "correct horse battery staple"
pytestmark = pytest.mark.usefixtures("one_thread")


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=180)


def _offered(at: AppTest, probe: tuple[str, str]) -> bool:
    """Whether the page drew the widget that offers an action (by key, or for buttons and expanders by label)."""
    kind, name = probe
    if kind == "button":
        return any(b.key == name or b.label == name for b in at.button)
    if kind == "expander":
        return any(name in e.label for e in at.expander)
    return any(w.key == name for w in at.get(kind))


def _in_navigation(at: AppTest, page_file: str) -> bool:
    try:
        at.switch_page(page_file)
    except ValueError as err:
        assert "Could not find a navigation page" in str(err)
        return False
    return True


@pytest.fixture()
def served(monkeypatch, models_cache, toy_classifier, tmp_path):
    """The toy model in the models cache, stores in tmp_path (the shipped results are read), a study with one
    link; returns a function that sets local or network serving and gives the study link's token."""
    from engine.annotation.studies import StudyConfig, StudyStore
    from engine.models import save_classifier
    from engine.plausibility import make_task

    save_classifier(toy_classifier, "toy-roles")
    monkeypatch.setenv("ENGINE_ANNOTATIONS_DB", str(tmp_path / "annotations.sqlite3"))
    monkeypatch.setenv("ENGINE_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setattr(admin, "FAILED_SIGN_IN_DELAY_S", 0.0)
    studies = StudyStore()
    tasks = [make_task("toy-roles", f"input {i}", ["a", "fine", "film"],
                       {"grad-l2": [0.1, 0.9, 0.2], "random": [0.3, 0.2, 0.1]}, target=1, target_name="positive")
             for i in range(2)]
    s = studies.create(StudyConfig(name="roles", model_id="toy-roles", measures=("grad-l2", "random"),
                                   n_examples=2, tasks_per_annotator=1, overlap=1, attention_checks=0), tasks)
    token = studies.invite(s.id, ["ann"])[0].token

    def serve(network: bool) -> str:
        if network:
            monkeypatch.setenv(admin.NETWORK_ENV, "1")
            monkeypatch.setenv(admin.SECRET_ENV, SECRET)
        else:
            monkeypatch.delenv(admin.NETWORK_ENV, raising=False)
            monkeypatch.delenv(admin.SECRET_ENV, raising=False)
        return token
    return serve


def _session(role: str, token: str, network: bool) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=180)
    if role == ANNOTATOR:
        at.query_params["study_token"] = token
    _run(at)
    if role == ADMIN and network:
        at.sidebar.text_input(key="admin_secret_input").input(SECRET)
        next(b for b in at.sidebar.button if b.label == "Sign in").click()
        _run(at)
    return at


@pytest.mark.parametrize("network", [False, True], ids=["local", "network"])
@pytest.mark.parametrize("role", [ANONYMOUS, ANNOTATOR, ADMIN])
def test_every_page_offers_each_role_exactly_what_the_table_allows(served, role, network):
    """For each page: in the navigation iff the role may open it; on it, each costly action (compute cells, the
    scores upload, Explain, masking, attention) offered iff the role may do it. On loopback a visitor who is not
    an annotator is the admin. An annotator sees the study and no other page."""
    token = served(network)
    effective = ADMIN if role == ANONYMOUS and not network else role
    at = _session(role, token, network)
    if role == ANNOTATOR:
        assert any(c.key == "study_consent_box" for c in at.checkbox) or at.text, "the study is shown"
        assert not at.sidebar.selectbox, "no model picker"
    for page in PAGES:
        if page.file is None:
            continue
        path = str(ROOT / "pages" / page.file)
        opens = effective in page.roles
        assert _in_navigation(at, path) is opens, (page.key, role, network)
        if not opens:
            continue
        _run(at)
        if page.key == "benchmarks":  # the scores upload is in the page's "Own explanations" part, drawn when chosen
            at.segmented_control(key="bench_part").set_value("own")
            _run(at)
        for action in ACTIONS:
            if action.page == page.key and action.probe is not None:
                assert _offered(at, action.probe) is availability.allowed(action.name, effective), \
                    (page.key, action.name, role, network)


def test_the_roles_table_in_the_docs_is_the_one_the_app_enforces():
    """docs/configuration.md holds app/availability.py's table as it prints it (`python -m app.availability`)."""
    docs = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert availability.roles_table() in docs


def test_an_anonymous_visitor_may_not_upload_or_compute_beyond_the_public_actions():
    """The decisions themselves: uploads and server-changing work are the admin's; Explain, masking and attention
    stay public (bounded); an annotator has only the study."""
    assert not availability.allowed("upload-scores", ANONYMOUS) and availability.allowed("upload-scores", ADMIN)
    assert not availability.allowed("compute-cells", ANONYMOUS) and not availability.allowed("self-explain", ANONYMOUS)
    public = {a.name for a in ACTIONS if availability.allowed(a.name, ANONYMOUS)}
    assert public == {"explain", "mask", "show-attention"}
    assert all(a.bounded for a in ACTIONS if a.name in public), "every public computation states its bound"
    assert {a.name for a in ACTIONS if availability.allowed(a.name, ANNOTATOR)} == {"study"}
    with pytest.raises(KeyError, match="actions: explain"):
        availability.allowed("train", ADMIN)


# -- an upload leaves no file ---------------------------------------------------------------------------------------
def _word_scores_csv(examples) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "start", "end", "score"])
    for ex in examples:
        start = 0
        for word in ex.primary.split(" "):
            if word:
                w.writerow([ex.uid, start, start + len(word), float(len(word))])
            start += len(word) + 1
    return buf.getvalue().encode()


def test_no_upload_file_outlives_its_evaluation(toy_classifier, tmp_path, monkeypatch):
    """Evaluated, refused for a bad row, or stopped mid-way: the system temp folder (where the page's upload is
    saved) holds nothing afterwards."""
    from app import own_scores
    from engine.data import get_dataset

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    dataset = toy_classifier.check_dataset(get_dataset("toy"))
    examples = dataset.split("test")[:2]
    result = own_scores.evaluate_upload(_word_scores_csv(examples), "words.csv", toy_classifier, dataset,
                                        builtin=("random",), limit=2, naopc=False)
    assert result.n_inputs == 2
    assert list(temp.iterdir()) == [], "an evaluated upload was left on disk"
    bad = b"id,start,end,score\nno-such-input,0,1,1.0\n"
    with pytest.raises(own_scores.UploadError.__mro__[1]):
        own_scores.evaluate_upload(bad, "bad.csv", toy_classifier, dataset, limit=1, naopc=False)
    assert list(temp.iterdir()) == [], "a refused upload was left on disk"

    def stop(done, total):
        raise KeyboardInterrupt  # a rerun or a closed browser stops the page's script mid-way

    with pytest.raises(KeyboardInterrupt):
        own_scores.evaluate_upload(_word_scores_csv(examples), "words.csv", toy_classifier, dataset,
                                   builtin=("random",), limit=2, naopc=False, progress=stop)
    assert list(temp.iterdir()) == [], "an interrupted evaluation left its upload on disk"

"""Plausibility: the annotation store never loses a submission and fails clearly; ratings, agreement and
ERASER metrics match hand-computed cases; export/import round-trips; the CLI works.

No test here depends on engine.importance: explanations are small hand-written score arrays.
"""
from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from engine.annotation import (
    SCHEMA_VERSION,
    AnnotationStore,
    AnnotationStoreError,
    export_jsonl,
    import_jsonl,
    rankings_csv,
    summary,
)
from engine.annotation.io import export_records
from engine.annotation.schema import migrate
from engine.plausibility import (
    anonymise,
    average_precision,
    bradley_terry,
    cohens_kappa,
    compare_with_rationales,
    iou_f1,
    kendalls_w,
    krippendorff_alpha_nominal,
    make_task,
    measure_rankings,
    measures_against_rationales,
    pairwise_wins,
    rationale_token_indices,
    spans_of,
    token_prf,
    top_k,
    trueskill_ratings,
)

TOKENS = ["a", "gorgeous", ",", "witty", "film"]
SCORES = {"grad": [0.1, 0.9, 0.0, 0.7, 0.2], "loo": [0.0, 0.5, -0.1, 0.8, 0.1], "random": [0.3, 0.1, 0.6, 0.2, 0.5]}


def _task(model_id="m", text="a gorgeous, witty film", scores=SCORES, gold=None):
    return make_task(model_id, text, TOKENS, scores, options={"random": {"seed": 0}}, target=1, target_name="pos",
                     target_source="predicted", label=1, label_name="pos", dataset="toy", gold_rationale=gold,
                     code_version="test")


@pytest.fixture()
def store(tmp_path):
    s = AnnotationStore(tmp_path / "a.sqlite3", busy_timeout=30)
    s.add_tasks([_task(), _task(text="dull and slow")])
    return s


def _all_slots(store, task_id):
    return [[slot] for slot in store.task(task_id).slots]


# -- concurrency and crashes (workers live at module level: spawned children import them) ------------
def _writer(path: str, writer: int, n: int, task_id: str, slots: list) -> None:
    s = AnnotationStore(path, busy_timeout=60)
    for i in range(n):
        if i % 2:
            s.submit_rationale(task_id, f"writer-{writer}", [i % 5], submission_id=f"w{writer}-{i}")
        else:
            s.submit_ranking(task_id, f"writer-{writer}", slots[::-1] if i % 4 else slots, submission_id=f"w{writer}-{i}")


def test_eight_concurrent_writers_lose_nothing(store):
    """8 processes x 200 submissions at once: every submission is stored exactly once."""
    task_id = store.tasks()[0].id
    slots = _all_slots(store, task_id)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(store.path), w, 200, task_id, slots)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 8
    got = {r.submission_id for r in store.rankings(latest_only=False)} | \
          {r.submission_id for r in store.rationales(latest_only=False)}
    assert got == {f"w{w}-{i}" for w in range(8) for i in range(200)}
    assert store.counts()["rankings"] == 800 and store.counts()["rationales"] == 800
    assert store.integrity_check() == "ok"


def _committer(path: str, task_id: str, slots: list, log: str) -> None:
    """Submits forever, logging each id only after its transaction committed."""
    s = AnnotationStore(path, busy_timeout=30)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    i = 0
    while True:
        s.submit_ranking(task_id, "killed", slots, submission_id=f"k{i}")
        os.write(fd, f"k{i}\n".encode())
        i += 1


def _hold_open_transaction(path: str, task_id: str, slots: list, flag: str) -> None:
    """Writes a ranking inside a transaction, then waits there to be killed before COMMIT."""
    s = AnnotationStore(path, busy_timeout=30)
    with s.transaction() as conn:
        s.insert_ranking(conn, "uncommitted", task_id, "killed", tuple(tuple(g) for g in slots), False, None)
        Path(flag).write_text("inside")
        time.sleep(120)


def _wait_for(predicate, timeout=60.0):
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_sigkill_mid_submission_keeps_the_store_consistent(store, tmp_path):
    """SIGKILL of a writer, inside an open transaction and at a random point of a submission loop,
    leaves a file that passes integrity_check, holds every committed row and nothing uncommitted, and
    takes new submissions at once (no stale lock)."""
    task_id = store.tasks()[0].id
    slots = _all_slots(store, task_id)
    ctx = mp.get_context("spawn")

    flag = tmp_path / "flag"
    p = ctx.Process(target=_hold_open_transaction, args=(str(store.path), task_id, slots, str(flag)))
    p.start()
    _wait_for(flag.exists)
    os.kill(p.pid, signal.SIGKILL)
    p.join(30)
    assert p.exitcode == -signal.SIGKILL
    assert store.integrity_check() == "ok"
    assert "uncommitted" not in {r.submission_id for r in store.rankings(latest_only=False)}

    log = tmp_path / "committed.log"
    for round_, wait in enumerate((15, 40)):
        p = ctx.Process(target=_committer, args=(str(store.path), task_id, slots, str(log)))
        p.start()
        _wait_for(lambda: log.exists() and log.read_text().count("\n") >= wait * (round_ + 1))
        os.kill(p.pid, signal.SIGKILL)
        p.join(30)
    committed = set(log.read_text().split())
    stored = {r.submission_id for r in store.rankings(latest_only=False)}
    assert store.integrity_check() == "ok"
    assert committed <= stored, f"lost committed submissions: {sorted(committed - stored)[:5]}"
    quick = AnnotationStore(store.path, busy_timeout=1)
    assert quick.submit_ranking(task_id, "after", slots)


def test_export_then_import_reproduces_the_store(store, tmp_path):
    """Export -> import into a fresh file gives the same records; importing again adds nothing."""
    t1, t2 = store.tasks()
    store.submit_ranking(t1.id, "ann <1>", _all_slots(store, t1.id))
    store.submit_ranking(t1.id, "ann <1>", [list(t1.slots)])  # a later, all-tied ranking: both kept
    store.submit_ranking(t2.id, "ann 2", (), cannot_decide=True)
    store.submit_rationale(t1.id, "ann 2", [1, 3, 4])
    out = tmp_path / "export.jsonl"
    export_jsonl(store, out)
    fresh = AnnotationStore(tmp_path / "fresh.sqlite3")
    added = import_jsonl(fresh, out)
    assert added == {"annotators": 2, "tasks": 2, "rankings": 3, "rationales": 1}

    def records(s):
        return [r for r in export_records(s) if r["type"] != "meta"]

    assert records(fresh) == records(store)
    assert import_jsonl(fresh, out) == {"annotators": 0, "tasks": 0, "rankings": 0, "rationales": 0}
    rationale = next(r for r in records(store) if r["type"] == "rationale")
    assert [(e["start_token"], e["end_token"]) for e in rationale["evidences"][0]] == [(1, 2), (3, 5)]
    assert rankings_csv(fresh) == rankings_csv(store)


def test_bad_import_line_imports_nothing(store, tmp_path):
    out = tmp_path / "export.jsonl"
    export_jsonl(store, out)
    out.write_text(out.read_text() + "{not json\n")
    fresh = AnnotationStore(tmp_path / "fresh.sqlite3")
    with pytest.raises(ValueError, match=r"export.jsonl:\d+: not a JSON line"):
        import_jsonl(fresh, out)
    assert fresh.counts()["tasks"] == 0


# -- bad input ------------------------------------------------------------------------------------------
def test_odd_annotator_names_are_stored_verbatim(store):
    """Markup, quotes, emoji and right-to-left text survive as typed; an empty name, and one holding a control
    character or a bidirectional override (which would show something else than was typed), is refused."""
    task_id = store.tasks()[0].id
    names = ['<script>alert("x")</script>', "Zoë 'O'Brien' \u05e9\u05dc\u05d5\u05dd 🙂", "  spaced  ", "a=b"]
    for name in ("tab\there", "rtl \u202eevil", "nul\x00"):
        with pytest.raises(ValueError, match="the annotator name holds"):
            store.submit_ranking(task_id, name, _all_slots(store, task_id))
    for name in names:
        store.submit_ranking(task_id, name, _all_slots(store, task_id))
    assert store.annotators() == names
    assert [r.annotator for r in store.rankings()] == names
    with pytest.raises(ValueError, match="name"):
        store.submit_ranking(task_id, "   ", _all_slots(store, task_id))


def test_duplicated_submission_is_stored_once(store):
    """The same submission id twice (a double click, a retry) stores one row; reusing the id for
    other content is refused rather than overwriting."""
    t = store.tasks()[0]
    assert store.submit_ranking(t.id, "ann", _all_slots(store, t.id), submission_id="same") is True
    assert store.submit_ranking(t.id, "ann", _all_slots(store, t.id), submission_id="same") is False
    assert store.counts()["rankings"] == 1
    with pytest.raises(ValueError, match="other content"):
        store.submit_ranking(t.id, "ann", _all_slots(store, t.id)[::-1], submission_id="same")
    assert store.submit_rationale(t.id, "ann", [0, 1], submission_id="r") is True
    assert store.submit_rationale(t.id, "ann", [1, 0, 1], submission_id="r") is False
    assert store.counts()["rationales"] == 1


def test_a_ranking_must_place_every_explanation_once(store):
    t = store.tasks()[0]
    with pytest.raises(ValueError, match="exactly once"):
        store.submit_ranking(t.id, "ann", [["A"], ["B"]])
    with pytest.raises(ValueError, match="exactly once"):
        store.submit_ranking(t.id, "ann", [["A"], ["A"], ["B", "C"]])
    with pytest.raises(ValueError, match="unknown task"):
        store.submit_ranking("nope", "ann", [["A"]])
    with pytest.raises(ValueError, match="outside"):
        store.submit_rationale(t.id, "ann", [5])
    assert store.counts()["rankings"] == store.counts()["rationales"] == 0


def test_locked_database_gives_a_clear_error_and_loses_nothing(store):
    """Another program holding the write lock: after the busy timeout, one clear error; the rows
    already there stay, and the submission goes through once the lock is released."""
    t = store.tasks()[0]
    store.submit_ranking(t.id, "ann", _all_slots(store, t.id), submission_id="before")
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    impatient = AnnotationStore(store.path, busy_timeout=0.2)
    with pytest.raises(AnnotationStoreError, match="is locked by another program") as err:
        impatient.submit_ranking(t.id, "ann", _all_slots(store, t.id), submission_id="during")
    assert "\n" not in str(err.value)
    other.execute("ROLLBACK")
    other.close()
    assert impatient.submit_ranking(t.id, "ann", _all_slots(store, t.id), submission_id="during")
    assert {r.submission_id for r in store.rankings(latest_only=False)} == {"before", "during"}


def test_read_only_database_gives_a_clear_error(store, tmp_path):
    """A store that cannot be written (opened read-only, or a write-protected file) refuses a
    submission with one clear line and still reads everything."""
    t = store.tasks()[0]
    store.submit_ranking(t.id, "ann", _all_slots(store, t.id), submission_id="kept")
    ro = AnnotationStore(store.path, read_only=True)
    with pytest.raises(AnnotationStoreError, match="is read-only; nothing was written"):
        ro.submit_ranking(t.id, "ann", _all_slots(store, t.id))
    assert [r.submission_id for r in ro.rankings()] == ["kept"]
    slots = _all_slots(store, t.id)
    failure = _without_write_permission(store.path, lambda path: AnnotationStore(path).submit_ranking(t.id, "ann", slots))
    assert failure is not None, "a submission to a write-protected file went through"
    assert failure[0] == "AnnotationStoreError" and "is read-only; nothing was written" in failure[1], failure
    assert [r.submission_id for r in store.rankings()] == ["kept"]


def _without_write_permission(path: Path, action) -> tuple[str, str] | None:
    """Run action(path) by a user who may read the file `path` but not write it, and return the exception it
    raised as (type name, message), or None. Root ignores file modes (CI runs as root): there the action
    runs in a forked child that has dropped to the unprivileged user `nobody`, on a copy of the file in a
    folder that user can enter; otherwise in this process, with the file's mode set to 0444."""
    import shutil
    import tempfile

    def attempt(target):
        try:
            action(target)
        except Exception as err:  # noqa: BLE001 (reported to the caller, who checks its type)
            return type(err).__name__, str(err)
        return None

    if os.geteuid() != 0:
        path.chmod(0o444)
        try:
            return attempt(path)
        finally:
            path.chmod(0o644)
    # under /tmp, not TMPDIR: every folder above the copy must be enterable by `nobody`
    folder = Path(tempfile.mkdtemp(prefix="engine-readonly-", dir="/tmp"))
    try:
        folder.chmod(0o777)  # nobody may enter it and create SQLite's side files, but not write the database
        copy = folder / path.name
        shutil.copyfile(path, copy)
        copy.chmod(0o444)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: drop root, try, report through the pipe, and leave without cleanup
            code = 1
            try:
                os.close(read)
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                os.write(write, json.dumps(attempt(copy)).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read) as pipe:
            reported = pipe.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, f"the unprivileged child failed: {reported!r}"
        result = json.loads(reported)
        return None if result is None else tuple(result)
    finally:
        shutil.rmtree(folder)


def test_not_a_database_gives_a_clear_error_and_is_left_untouched(tmp_path):
    path = tmp_path / "notes.sqlite3"
    content = b"these are my notes, not a database\n" * 200
    path.write_bytes(content)
    with pytest.raises(AnnotationStoreError, match="is not an SQLite database") as err:
        AnnotationStore(path)
    assert "\n" not in str(err.value)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.sqlite3"], "no -wal/-shm left beside it"
    with pytest.raises(AnnotationStoreError, match="is a folder"):
        AnnotationStore(tmp_path)


def test_store_is_wal_and_migrates_an_old_schema(tmp_path):
    """A version-1 file with rows is upgraded step by step with its rows intact; a file from a newer
    version is refused untouched."""
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, upto=1) == 1
    conn.close()
    v1 = AnnotationStore.__new__(AnnotationStore)  # write a task through the v1 schema
    v1.path, v1.busy_timeout, v1.read_only = path, 5.0, False
    v1.add_tasks([_task()])
    s = AnnotationStore(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert [r[0] for r in conn.execute("SELECT version FROM schema_history")] == list(range(1, SCHEMA_VERSION + 1))
    assert "rankings_by_task" in {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    assert s.task_count() == 1
    with pytest.raises(AnnotationStoreError, match="newer than this code"):
        AnnotationStore(path)


def test_default_path_and_env_override(monkeypatch, tmp_path):
    from engine.annotation import default_db_path

    monkeypatch.delenv("ENGINE_ANNOTATIONS_DB", raising=False)
    assert default_db_path().parts[-2:] == ("annotations", "annotations.sqlite3")
    monkeypatch.setenv("ENGINE_ANNOTATIONS_DB", str(tmp_path / "x.sqlite3"))
    assert default_db_path() == tmp_path / "x.sqlite3"


# -- tasks ----------------------------------------------------------------------------------------------
def test_tasks_are_anonymised_with_a_per_task_seed(store):
    """Slots are a seeded shuffle: the same seed gives the same order, seeds differ across tasks, and
    the same input and measures give the same task id (preparing twice adds nothing)."""
    measures = ["grad", "loo", "random", "ig"]
    assert anonymise(measures, 3) == anonymise(measures, 3)
    orders = {tuple(m for _, m in anonymise(measures, seed)) for seed in range(20)}
    assert len(orders) > 5, "the order depends on the seed"
    t1, t2 = store.tasks()
    assert t1.seed != t2.seed
    assert [e.slot for e in t1.explanations] == ["A", "B", "C"]
    assert sorted(t1.measure_of().values()) == ["grad", "loo", "random"]
    assert store.add_tasks([_task()]) == 0
    assert store.task(t1.id) == t1


def test_next_task_advances_per_annotator_and_kind(store):
    t1, t2 = store.tasks()
    assert store.next_task("m", "ann", "ranking").id == t1.id
    store.submit_ranking(t1.id, "ann", (), cannot_decide=True)
    assert store.next_task("m", "ann", "ranking").id == t2.id
    assert store.next_task("m", "other", "ranking").id == t1.id, "each annotator has their own queue"
    assert store.next_task("m", "ann", "rationale").id == t1.id, "each kind has its own queue"
    store.submit_ranking(t2.id, "ann", _all_slots(store, t2.id))
    assert store.next_task("m", "ann", "ranking") is None
    assert store.progress("m", "ann", "ranking") == (2, 2)


# -- ranking maths --------------------------------------------------------------------------------------
def test_pairwise_wins_by_hand():
    measures, w = pairwise_wins([{"a": 0, "b": 1, "c": 1}, {"a": 1, "b": 0, "c": 2}])
    assert measures == ["a", "b", "c"]
    # a>b, a>c, b~c ; b>a, b>c, a>c
    assert w.tolist() == [[0, 1, 2], [1, 0, 1.5], [0, 0.5, 0]]


def test_a_measure_that_always_wins_ranks_first_in_trueskill_and_bradley_terry():
    rankings = [{"best": 0, "mid": 1, "worst": 2}, {"best": 0, "worst": 1, "mid": 2}] * 10
    ts = trueskill_ratings(rankings)
    bt = bradley_terry(rankings)
    assert ts[0]["measure"] == "best" and ts[0]["rank"] == 1
    assert bt[0]["measure"] == "best" and bt[0]["rank"] == 1
    assert ts[0]["conservative"] == pytest.approx(ts[0]["mu"] - 3 * ts[0]["sigma"])
    assert ts[0]["mu"] > 25 and ts[0]["sigma"] < 25 / 3, "more evidence, less uncertainty"
    # mid and worst each win half their meetings: equal Bradley-Terry strength, and finite despite "best"
    assert bt[1]["strength"] == pytest.approx(bt[2]["strength"])
    assert all(math.isfinite(r["strength"]) for r in bt)
    assert bt[0]["p_beats_average"] > 0.9


def test_ties_are_draws():
    """Two measures always tied with each other, always above a third: equal standing in both models."""
    rankings = [{"x": 0, "y": 0, "z": 1}] * 8
    ts = {r["measure"]: r for r in trueskill_ratings(rankings)}
    assert ts["x"]["mu"] == pytest.approx(ts["y"]["mu"], abs=0.2)
    assert min(ts["x"]["mu"], ts["y"]["mu"]) > ts["z"]["mu"]
    bt = {r["measure"]: r for r in bradley_terry(rankings)}
    assert bt["x"]["strength"] == pytest.approx(bt["y"]["strength"])
    assert bt["x"]["strength"] > bt["z"]["strength"]
    # Bradley-Terry by hand without prior: a beats b 3 of 4 -> p_a / p_b = 3, log strengths +-ln(3)/2
    bt = bradley_terry([{"a": 0, "b": 1}] * 3 + [{"a": 1, "b": 0}], prior=0)
    assert bt[0]["strength"] == pytest.approx(math.log(3) / 2, abs=1e-6)


def test_measure_rankings_follow_the_anonymised_slots(store):
    t = store.tasks()[0]
    measure_of = t.measure_of()
    store.submit_ranking(t.id, "ann", [["C"], ["A", "B"]])
    store.submit_ranking(t.id, "other", (), cannot_decide=True)
    ranked = measure_rankings(store.rankings(), {t.id: t})
    assert ranked == [{measure_of["C"]: 0, measure_of["A"]: 1, measure_of["B"]: 1}]


# -- agreement ------------------------------------------------------------------------------------------
def test_kendalls_w_by_hand():
    perfect = [{"a": 1, "b": 2, "c": 3}] * 4
    assert kendalls_w(perfect)["W"] == pytest.approx(1.0)
    assert kendalls_w([{"a": 1, "b": 2, "c": 3}, {"a": 3, "b": 2, "c": 1}])["W"] == pytest.approx(0.0)
    # with ties: raters (1,2,3), (1,2.5,2.5): R = (2, 4.5, 5.5), S = 6.5, T = 6: W = 12*6.5/(4*24 - 2*6) = 78/84
    assert kendalls_w([{"a": 0, "b": 1, "c": 2}, {"a": 0, "b": 1, "c": 1}])["W"] == pytest.approx(78 / 84)
    assert math.isnan(kendalls_w([{"a": 1, "b": 2}])["W"]), "one rater: undefined"


def test_krippendorff_alpha_matches_the_published_example():
    """Krippendorff (2011) 'Computing Krippendorff's alpha-reliability', nominal example: alpha = 0.743."""
    n = None
    coders = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
        [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n],
    ]
    units = list(zip(*coders))
    assert krippendorff_alpha_nominal(units) == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha_nominal([(1, 1), (0, 0), (1, 1)]) == pytest.approx(1.0)
    assert math.isnan(krippendorff_alpha_nominal([(1, 1), (1, 1)])), "no variation: undefined"


def test_cohens_kappa_by_hand():
    # p_o = 0.8; p_e = 0.5*0.6 + 0.5*0.4 = 0.5 -> kappa 0.6
    a = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    b = [1, 1, 1, 1, 1, 1, 0, 0, 0, 1]
    assert cohens_kappa(a, b) == pytest.approx(0.6)
    assert cohens_kappa(a, a) == pytest.approx(1.0)


def test_summary_reports_agreement_from_the_store(store):
    t1, t2 = store.tasks()
    for ann in ("a", "b", "c"):
        store.submit_ranking(t1.id, ann, [["A"], ["B"], ["C"]])
        store.submit_rationale(t1.id, ann, [1, 3])
    data = summary(store, "m")
    assert data["kendalls_w"]["mean_W"] == pytest.approx(1.0)
    assert data["rationale_agreement"]["alpha"] == pytest.approx(1.0)
    assert data["trueskill"][0]["measure"] == t1.measure_of()["A"]
    grad = next(r for r in data["against_annotated_rationales"] if r["measure"] == "grad")
    assert grad["token_f1"] == grad["auprc"] == pytest.approx(1.0), "grad's top-2 tokens are exactly the marked ones"


# -- rationale metrics ----------------------------------------------------------------------------------
def test_average_precision_by_hand():
    assert average_precision([0.9, 0.8, 0.7, 0.6], [0, 1]) == pytest.approx(1.0)
    # gold at ranks 1 and 3: (0.5 * 1/1) + (0.5 * 2/3)
    assert average_precision([0.9, 0.8, 0.7, 0.6], [0, 2]) == pytest.approx(0.5 + 1 / 3)
    # gold last of 4: precision 1/4 at recall 1
    assert average_precision([0.9, 0.8, 0.7, 0.6], [3]) == pytest.approx(0.25)
    # tied scores enter together: one threshold with 1 of 2 correct
    assert average_precision([1.0, 1.0, 0.0], [1]) == pytest.approx(0.5)
    assert average_precision([0.2, 0.9, 0.1], [False, True, False]) == pytest.approx(1.0)
    assert math.isnan(average_precision([0.1, 0.2], []))


def test_token_f1_top_k_and_spans_by_hand():
    assert top_k([0.1, 0.9, 0.0, 0.7, 0.2], 2) == (1, 3)
    assert top_k([0.5, 0.5, 0.5], 2) == (0, 1), "ties: the earlier token first"
    assert token_prf({1, 3}, {1, 2, 3, 4}) == pytest.approx((1.0, 0.5, 2 / 3))
    assert spans_of([7, 1, 2, 3]) == [(1, 4), (7, 8)]


def test_iou_f1_by_hand():
    # spans (0,3) and (1,4): IOU 2/4 = 0.5 -> a match at the threshold
    assert iou_f1([{0, 1, 2}], [{1, 2, 3}])["macro_f1"] == pytest.approx(1.0)
    # (0,2) vs (1,4): IOU 1/4 -> no match
    assert iou_f1([{0, 1}], [{1, 2, 3}])["macro_f1"] == pytest.approx(0.0)
    # predicted (0,2) and (5,6); gold (0,3): 1 of 2 predicted spans match (IOU 2/3), 1 of 1 gold found
    assert iou_f1([{0, 1, 5}], [{0, 1, 2}])["macro_f1"] == pytest.approx(2 / 3)
    # two inputs: macro P = (1 + 0)/2, R = (1 + 0)/2 -> F1 0.5
    assert iou_f1([{0}, {4}], [{0}, {1}])["macro_f1"] == pytest.approx(0.5)


def test_compare_with_rationales_uses_the_mean_gold_length_as_k():
    res = compare_with_rationales([[0.9, 0.1, 0.8, 0.0], [0.0, 0.2, 0.1, 0.9]], [{0, 2}, {3, 2}])
    assert res["k"] == 2
    assert res["token_f1"] == pytest.approx((1.0 + 0.5) / 2)
    assert res["auprc"] == pytest.approx((1.0 + (0.5 + 0.5 * 2 / 3)) / 2)


def test_babi_supporting_facts_map_to_their_tokens():
    """bAbI's character spans become exactly the tokens of the supporting sentence, through the
    tokenizer's offsets, and the gold rationale scores a measure that points at it perfectly."""
    from transformers import AutoTokenizer

    from engine.data import get_dataset
    from engine.models import resolve_encoder, tokenize

    tok = AutoTokenizer.from_pretrained(resolve_encoder("tiny"))
    example = get_dataset("babi-1").split("test")[0]
    batch = tokenize(tok, [example.primary], [example.auxiliary])
    keep = batch.maskable[0].tolist()
    idx = rationale_token_indices(batch.offsets[0], keep, example.rationale_spans)
    tokens = tok.convert_ids_to_tokens(batch.input_ids[0][batch.maskable[0]].tolist())
    start, end = example.rationale_spans[0]
    assert " ".join(tokens[i] for i in idx).replace(" .", ".") == example.primary[start:end].lower()
    assert list(idx) == list(range(idx[0], idx[-1] + 1)), "one sentence: one contiguous run"
    perfect = [1.0 if i in idx else 0.0 for i in range(len(tokens))]
    task = make_task("m", example.primary, tokens, {"perfect": perfect, "flat": [0.0] * len(tokens)}, gold_rationale=idx)
    rows = {r["measure"]: r for r in measures_against_rationales([task])}
    assert rows["perfect"]["auprc"] == rows["perfect"]["token_f1"] == rows["perfect"]["iou_f1"] == 1.0
    assert rows["flat"]["auprc"] == pytest.approx(len(idx) / len(tokens))


def fake_importance_module():
    """A stand-in `engine.importance` with its interface (`MEASURES`, `get_explainer(name, classifier,
    **options).attribute(batch, target) -> .scores [B, T], .maskable, .target, .measure, .options`) whose
    scores are known exactly: `position` scores a token by its position, `reverse` by minus that."""
    import types

    import torch

    class Importance:
        def __init__(self, scores, maskable, target, measure, options):
            self.scores, self.maskable, self.target, self.measure, self.options = scores, maskable, target, measure, options

    class Explainer:
        def __init__(self, name, options):
            self.name, self.options = name, options

        def attribute(self, batch, target=None):
            pos = torch.arange(batch.input_ids.shape[1], dtype=torch.float).expand_as(batch.input_ids)
            scores = (pos if self.name == "position" else -pos) * batch.maskable
            return Importance(scores, batch.maskable, target, self.name, {"scale": 1, **self.options})

    module = types.ModuleType("engine.importance")
    module.MEASURES = {"position": Explainer, "reverse": Explainer}
    module.get_explainer = lambda name, classifier, **options: Explainer(name, options)
    module.measure_availability = lambda classifier: {"position": "", "reverse": ""}
    return module


def test_babi_tasks_carry_the_supporting_facts_and_are_scored_against_them(monkeypatch):
    """`build_tasks` on paired bAbI inputs keeps only the paragraph's tokens, maps the supporting facts to
    them through `Batch.offsets`, and `supporting_fact_metrics` scores every measure against them with
    no annotation (an untrained model: only the plumbing is under test)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from engine.data import get_dataset
    from engine.models import Classifier, resolve_encoder
    from engine.plausibility import build_tasks, supporting_fact_metrics
    from engine.runtime import configure

    configure()  # quiet transformers' load report
    monkeypatch.setitem(sys.modules, "engine.importance", fake_importance_module())
    dataset = get_dataset("babi-1")
    path = resolve_encoder("tiny")
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=dataset.num_classes)
    classifier = Classifier(model, AutoTokenizer.from_pretrained(path), dataset.classes, 192,
                            {"id": "untrained", "dataset": "babi-1"})
    examples = dataset.split("test")[:6]
    tasks = build_tasks(classifier, examples, ["position", "reverse"], batch_size=4)
    for example, task in zip(examples, tasks):
        assert task.primary == example.primary and task.auxiliary == example.auxiliary
        sentence = example.primary[slice(*example.rationale_spans[0])].lower()
        shown = " ".join(task.tokens[i] for i in task.gold_rationale).replace(" ##", "").replace(" .", ".")
        assert shown == sentence
        assert "?" not in task.tokens, "the question is never explained"
        assert task.explanations[0].target == task.target and task.target_source == "predicted"
    rows = {r["measure"]: r for r in supporting_fact_metrics(classifier, dataset, ["position", "reverse"], limit=6)}
    assert sorted(rows) == ["position", "reverse"] and rows["position"]["n"] == 6
    assert all(0 <= rows[m][key] <= 1 for m in rows for key in ("token_f1", "iou_f1", "auprc"))


# -- command line ---------------------------------------------------------------------------------------
def test_cli_export_import_stats(store, tmp_path, capsys):
    from engine.cli import main

    t = store.tasks()[0]
    store.submit_ranking(t.id, "ann", [["A"], ["B"], ["C"]])
    out, csv_path, db2 = tmp_path / "e.jsonl", tmp_path / "r.csv", tmp_path / "b.sqlite3"
    assert main(["annotations", "export", str(out), "--csv", str(csv_path), "--db", str(store.path)]) == 0
    assert csv_path.read_text().splitlines()[0].startswith("submission_id,task_id")
    assert main(["annotations", "import", str(out), "--db", str(db2)]) == 0
    assert "1 new rankings" in capsys.readouterr().out
    assert main(["annotations", "stats", "--db", str(db2), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trueskill"][0]["measure"] == t.measure_of()["A"]
    assert main(["annotations", "stats", "--db", str(tmp_path / "missing.sqlite3")]) == 2
    assert "no annotation database" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["annotations", "export", "--help"])
    assert "JSON lines" in capsys.readouterr().out

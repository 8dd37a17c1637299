"""`python -m engine study ...` end to end on a real trained model (the tiny BERT masked-fine-tuned on `toy`):
create explains the examples, invite prints working links, status shows coverage, flags and ratings, export
writes JSONL and a formula-safe CSV, close refuses the links."""
from __future__ import annotations

import csv
import json
import random
from urllib.parse import parse_qs, urlparse

import pytest

from engine.annotation.studies import StudyClosedError, StudyStore
from engine.annotation.studies.drills import answer_for
from engine.cli import main


def test_study_create_invite_annotate_status_export_close_on_a_trained_model(models_cache, toy_classifier, tmp_path, capsys):
    """The whole organiser workflow through the CLI, with the annotators going through the engine path the
    dashboard uses; the tasks carry the real model's explanations (one score per token per measure)."""
    from engine.models.checkpoint import save_classifier

    save_classifier(toy_classifier, "study-toy")
    db = str(tmp_path / "annotations.sqlite3")
    assert main(["study", "create", "--model", "study-toy", "--measures", "random", "grad-l2", "loo-sign", "--examples", "4",
                 "--tasks-per-annotator", "2", "--overlap", "2", "--checks", "1", "--db", db, "--id", "study-cli",
                 "--name", "Rank the highlights"]) == 0
    out = capsys.readouterr().out
    assert "created study-cli" in out and "it needs 4 annotators" in out
    studies = StudyStore(db)
    tasks = studies.tasks("study-cli")
    assert len(tasks) == 4
    for task in tasks.values():
        assert {e.measure for e in task.explanations} == {"random", "grad-l2", "loo-sign"}
        assert all(len(e.scores) == len(task.tokens) for e in task.explanations) and task.model_id == "study-toy"

    assert main(["study", "invite", "study-cli", "--names", "alice", "bob", "=cmd|evil", "--db", db,
                 "--base-url", "https://lab.example/"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    urls = dict(line.split("\t") for line in lines)
    assert set(urls) == {"alice", "bob", "=cmd|evil"}
    tokens = {name: parse_qs(urlparse(url).query)["study_token"][0] for name, url in urls.items()}
    assert main(["study", "invite", "study-cli", "--open", "--db", db]) == 0
    open_out = capsys.readouterr().out
    assert "PROLIFIC_PID={{%PROLIFIC_PID%}}" in open_out and "completion code" in open_out
    open_token = parse_qs(urlparse(open_out.split("\t")[1].split()[0]).query)["study_token"][0]

    rng = random.Random(0)
    sessions = [studies.open_session(tokens[name]) for name in ("alice", "bob", "=cmd|evil")]
    sessions.append(studies.open_session(open_token, worker_id="5f00d"))
    for session in sessions:
        view = session.title + session.instructions + repr(session)
        assert "study-toy" not in view and "grad-l2" not in view  # the annotator's view names no model or measure
        while (item := studies.next_assignment(session)) is not None:
            assert "study-toy" not in repr(item) and "grad-l2" not in repr(item)
            studies.submit(session, item.assignment_id, comment="=1+2", **answer_for(item, rng))
    assert studies.progress(sessions[-1]).completion_code == studies.study("study-cli").completion_code

    assert main(["study", "status", "study-cli", "--db", db, "--bootstrap", "50"]) == 0
    status = capsys.readouterr().out
    assert "tasks answered exactly 2 times: 4 of 4 (over: 0)" in status
    for text in ("TrueSkill", "Bradley-Terry", "Krippendorff's alpha", "Kendall's W", "alice", "5f00d"):
        assert text in status
    assert main(["study", "status", "study-cli", "--db", db, "--json", "--bootstrap", "0"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["coverage"]["complete"] == 4 and len(data["ratings"]["trueskill"]) == 3

    assert main(["study", "exclude", "study-cli", "bob", "--reason", "test", "--db", db]) == 0
    capsys.readouterr()
    assert main(["study", "export", "study-cli", str(tmp_path / "s.jsonl"), "--csv", str(tmp_path / "s.csv"),
                 "--db", db, "--bootstrap", "20"]) == 0
    records = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert records[0]["study"]["command_line"].startswith("python -m engine study create --model study-toy")
    assert records[-1]["excluded"] == ["bob"]
    assert records[0]["study"]["config"]["dataset"] == "toy" and records[0]["study"]["config"]["model_id"] == "study-toy"
    with open(tmp_path / "s.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["annotator"] for r in rows} >= {"alice", "'=cmd|evil"} and {r["comment"] for r in rows} == {"'=1+2"}

    assert main(["study", "close", "study-cli", "--db", db]) == 0
    assert "study-cli is closed" in capsys.readouterr().out
    with pytest.raises(StudyClosedError):
        studies.open_session(tokens["alice"])
    assert main(["study", "status", "--db", db]) == 0
    assert "study-cli" in capsys.readouterr().out


def test_study_commands_refuse_unknown_studies_and_bad_designs_in_one_line(tmp_path, capsys):
    """An unknown study id lists the existing ones; a bad design is refused before any model is loaded."""
    db = str(tmp_path / "a.sqlite3")
    StudyStore(db)
    assert main(["study", "status", "nope", "--db", db]) == 2
    assert "no study 'nope'; studies: none yet" in capsys.readouterr().err
    assert main(["study", "create", "--model", "no-such-model", "--measures", "random", "--db", db]) == 2
    assert "at least two measures" in capsys.readouterr().err
    assert main(["study", "invite", "nope", "--names", "a", "--db", db]) == 2

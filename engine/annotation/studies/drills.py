"""Load and crash drills for studies: many annotators answering at once through the dashboard's own engine
path (`StudyStore.open_session`, `next_assignment`, `submit`), and a SIGKILL of an annotating process.

Used by tests/engine/test_study_load.py (small, seconds) and scripts/tools/study_load.py (the figures in docs/studies.md).

The drill's tasks are the packaged `toy` dataset's sentences with made-up explanation scores (a seeded
pseudo-random score per word and measure): the drills exercise assignment, storage and recovery, for which
what the explanations say does not matter, and they need no model.

The worker entry point (`python -m engine.annotation.studies.drills worker --db PATH --token T ...`) answers
every item of the given links and prints `SUBMITTED <submission id>` (flushed) after each `submit` returns:
what a killed worker printed is exactly what it was told was stored.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from engine.annotation.studies import Assignment, Session, StudyConfig, StudyStore
from engine.plausibility.tasks import Task, make_task

DEMO_MEASURES = ("grad-l2", "loo-sign", "random")


def demo_tasks(n: int, measures: tuple[str, ...] = DEMO_MEASURES, model_id: str = "load-drill") -> list[Task]:
    """`n` tasks from the toy dataset's sentences (all splits, test first), with seeded made-up scores."""
    from engine.data import get_dataset

    dataset = get_dataset("toy")
    examples = [*dataset.split("test"), *dataset.split("validation"), *dataset.split("train")]
    seen, picked = set(), []
    for e in examples:
        if e.primary not in seen:
            seen.add(e.primary)
            picked.append(e)
    if n > len(picked):
        raise ValueError(f"the toy dataset has {len(picked)} distinct sentences; asked for {n}")
    tasks = []
    for e in picked[:n]:
        tokens = e.primary.split()
        rng = random.Random(e.uid)
        scores = {m: [round(rng.random(), 4) for _ in tokens] for m in measures}
        tasks.append(make_task(model_id, e.primary, tokens, scores, target=e.label, target_name=dataset.classes[e.label],
                               target_source="predicted", label=e.label, label_name=dataset.classes[e.label],
                               dataset="toy", example_uid=e.uid))
    return tasks


def make_drill_study(studies: StudyStore, n_tasks: int, overlap: int, tasks_per_annotator: int, checks: int = 1,
                     annotators: int = 0, name: str = "Load drill") -> tuple[str, list[str]]:
    """A study over `demo_tasks(n_tasks)` and `annotators` personal links. Returns (study id, raw tokens)."""
    config = StudyConfig(name=name, model_id="load-drill", measures=DEMO_MEASURES, dataset="toy",
                         n_examples=n_tasks, tasks_per_annotator=tasks_per_annotator, overlap=overlap,
                         attention_checks=checks)
    study = studies.create(config, demo_tasks(n_tasks), code_version="drill")
    links = studies.invite(study.id, [f"annotator-{k:02d}" for k in range(1, annotators + 1)]) if annotators else []
    return study.id, [link.token for link in links]


def answer_for(assignment: Assignment, rng: random.Random, careful: bool = True) -> dict:
    """A plausible answer: a random ordering of the slots (an instructed check is obeyed when `careful`)."""
    slots = list(assignment.task.slots)
    rng.shuffle(slots)
    if careful and assignment.note and "put explanation " in assignment.note:
        wanted = assignment.note.split("put explanation ", 1)[1].split(" ", 1)[0]
        slots.remove(wanted)
        slots.insert(0, wanted)
    answer: dict = {}
    if "ranking" in assignment.kinds:
        answer["ordering"] = [[s] for s in slots]
    if "rationale" in assignment.kinds:
        answer["rationale"] = sorted(rng.sample(range(len(assignment.task.tokens)), min(2, len(assignment.task.tokens))))
    return answer


@dataclass
class AnnotatorRun:
    """What one simulated annotator did: submission ids stored, per-call latencies (s), errors."""

    label: str = ""
    submitted: list[str] = field(default_factory=list)
    next_seconds: list[float] = field(default_factory=list)
    submit_seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    started: float = 0.0   # time.time() when it opened its link
    ended: float = 0.0     # time.time() when it was done


def annotate(studies: StudyStore, token: str, *, worker_id: str | None = None, seed: int = 0, think: float = 0.0,
             start_at: float | None = None, on_submit=None) -> AnnotatorRun:
    """Open the link and answer every item given, as the annotator's page does. `think`: seconds to wait
    before each answer; `start_at`: a time.time() to wait for (so many annotators start together);
    `on_submit(submission_id)`: called after each stored answer."""
    run = AnnotatorRun()
    rng = random.Random(seed)
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))
    run.started = time.time()
    try:
        session: Session = studies.open_session(token, worker_id)
        run.label = session.label
        while True:
            t0 = time.perf_counter()
            assignment = studies.next_assignment(session)
            run.next_seconds.append(time.perf_counter() - t0)
            if assignment is None:
                break
            if think:
                time.sleep(think * rng.random() * 2)
            submission_id = f"{session.participant_id}-{assignment.assignment_id}-{rng.getrandbits(48):012x}"
            t0 = time.perf_counter()
            studies.submit(session, assignment.assignment_id, submission_id=submission_id, **answer_for(assignment, rng))
            run.submit_seconds.append(time.perf_counter() - t0)
            run.submitted.append(submission_id)
            if on_submit is not None:
                on_submit(submission_id)
    except Exception as err:  # a drill records every failure instead of stopping the other annotators
        run.errors.append(f"{type(err).__name__}: {err}")
    run.ended = time.time()
    return run


def annotate_many(path: str, tokens: list[str], start_at: float | None = None, think: float = 0.0,
                  seed: int = 0) -> list[AnnotatorRun]:
    """One thread per token, each answering through its own StudyStore (as separate browser sessions do)."""
    runs: list[AnnotatorRun] = [AnnotatorRun() for _ in tokens]

    def one(k: int) -> None:
        runs[k] = annotate(StudyStore(path), tokens[k], seed=seed * 1000 + k, think=think, start_at=start_at)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(tokens))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return runs


def invariants(studies: StudyStore, study_id: str) -> dict:
    """What must hold after any run: per task, answers never above the overlap; per annotator, no item twice;
    every answer belongs to a live assignment; SQLite's integrity check."""
    status = studies.status(study_id)
    answers = studies.answers(study_id)
    per_pair = Counter((a.participant_id, a.item_id) for a in answers)
    return {
        "tasks": status.study.n_tasks,
        "overlap": status.study.config.overlap,
        "tasks_exact": status.complete,
        "tasks_over": status.over,
        "answers": len(answers),
        "real_answers": sum(1 for a in answers if a.task_id),
        "duplicate_items": sum(1 for n in per_pair.values() if n > 1),
        "submission_ids_unique": len({a.submission_id for a in answers}) == len(answers),
        "integrity": studies.annotations.integrity_check(),
    }


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _worker_process(args: tuple) -> list[dict]:
    """One process of the load drill: signal ready, wait for every process to be ready (a file barrier: spawned
    processes import at different speeds), then start all its annotators at once."""
    path, tokens, think, seed, ready_dir, n_processes = args
    from pathlib import Path

    StudyStore(path)  # open (and check) the database before the start, as a running server has
    Path(ready_dir, f"{seed}").touch()
    deadline = time.time() + 120
    while len(os.listdir(ready_dir)) < n_processes and time.time() < deadline:
        time.sleep(0.005)
    return [run.__dict__ for run in annotate_many(path, tokens, start_at=time.time() + 0.05, think=think, seed=seed)]


def run_load(path: str, annotators: int = 30, tasks_per_annotator: int = 6, overlap: int = 3, checks: int = 1,
             processes: int = 3, think: float = 0.0) -> dict:
    """The load drill: a study sized so that `annotators` exactly fill it, every annotator starting at the same
    instant, spread over `processes` processes (threads inside each). Returns figures and `invariants`."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    n_tasks = annotators * tasks_per_annotator // overlap
    studies = StudyStore(path)
    study_id, tokens = make_drill_study(studies, n_tasks, overlap, tasks_per_annotator, checks, annotators)
    shares = [tokens[k::processes] for k in range(processes)]
    import tempfile

    ready_dir = tempfile.mkdtemp(prefix="study-load-ready-")
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=processes, mp_context=get_context("spawn")) as pool:
        results = list(pool.map(_worker_process, [(str(path), share, think, k, ready_dir, processes)
                                                  for k, share in enumerate(shares)]))
    runs = [r for chunk in results for r in chunk]
    # from the first annotator opening a link to the last one done (a process that started late is not counted idle)
    wall = max(r["ended"] for r in runs) - min(r["started"] for r in runs) if runs else time.time() - t0
    start_spread = max(r["started"] for r in runs) - min(r["started"] for r in runs) if runs else 0.0
    submits = [s for r in runs for s in r["submit_seconds"]]
    nexts = [s for r in runs for s in r["next_seconds"]]
    figures = invariants(studies, study_id)
    stored = {a.submission_id for a in studies.answers(study_id)}
    acknowledged = [s for r in runs for s in r["submitted"]]
    figures.update({
        "study_id": study_id, "annotators": annotators, "processes": processes, "think_seconds": think,
        "acknowledged": len(acknowledged), "lost": sum(1 for s in acknowledged if s not in stored),
        "errors": [e for r in runs for e in r["errors"]], "wall_seconds": round(wall, 3),
        "answers_per_second": round(len(acknowledged) / wall, 1) if wall > 0 else None,
        "start_spread_seconds": round(start_spread, 3),  # between the first and the last annotator opening their link
        "submit_ms_median": round(1000 * statistics.median(submits), 1) if submits else None,
        "submit_ms_p95": round(1000 * _percentile(submits, 0.95), 1),
        "next_ms_median": round(1000 * statistics.median(nexts), 1) if nexts else None,
        "next_ms_p95": round(1000 * _percentile(nexts, 0.95), 1),
    })
    return figures


def run_crash(path: str, annotators: int = 6, tasks_per_annotator: int = 6, overlap: int = 2, kill_after: int = 10,
              timeout: float = 120.0) -> dict:
    """The crash drill: a worker process answers for `annotators` links at once; after it has acknowledged
    `kill_after` answers it is SIGKILLed. Every acknowledged answer must be stored; a second worker with the
    same links then resumes and finishes the study (every task at exactly its overlap)."""
    n_tasks = annotators * tasks_per_annotator // overlap
    studies = StudyStore(path)
    study_id, tokens = make_drill_study(studies, n_tasks, overlap, tasks_per_annotator, 1, annotators)
    command = [sys.executable, "-m", "engine.annotation.studies.drills", "worker", "--db", str(path), "--think", "0.01",
               *[f"--token={token}" for token in tokens]]  # "=" form: a token may start with "-"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), _root()) if p)}
    worker = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    acknowledged: list[str] = []
    deadline = time.time() + timeout
    while len(acknowledged) < kill_after and time.time() < deadline:
        line = worker.stdout.readline()
        if not line:
            break
        if line.startswith("SUBMITTED "):
            acknowledged.append(line.split()[1])
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    for line in worker.stdout.read().splitlines():  # acknowledged in the instant before the kill
        if line.startswith("SUBMITTED "):
            acknowledged.append(line.split()[1])
    after_kill = StudyStore(path)
    stored = {a.submission_id for a in after_kill.answers(study_id)}
    killed = {"acknowledged": len(acknowledged), "stored": len(stored),
              "lost": sorted(s for s in acknowledged if s not in stored), "integrity": after_kill.annotations.integrity_check(),
              "returncode": worker.returncode}
    resumed = subprocess.run(command[:7] + ["0"] + command[8:], capture_output=True, text=True, env=env, timeout=timeout)
    final = invariants(StudyStore(path), study_id)
    return {"study_id": study_id, "killed": killed, "resume_returncode": resumed.returncode,
            "resume_errors": [line for line in resumed.stdout.splitlines() if line.startswith("ERROR ")] + (
                [resumed.stderr[-2000:]] if resumed.returncode else []),
            "final": final}


def _root() -> str:
    from pathlib import Path

    return str(Path(__file__).resolve().parents[2])


def _worker_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.annotation.studies.drills worker")
    p.add_argument("--db", required=True)
    p.add_argument("--token", action="append", required=True)
    p.add_argument("--think", type=float, default=0.0)
    args = p.parse_args(argv)
    lock = threading.Lock()

    def printed(submission_id: str) -> None:
        with lock:
            print(f"SUBMITTED {submission_id}", flush=True)

    runs: list[AnnotatorRun] = []

    def one(k: int, token: str) -> None:
        runs.append(annotate(StudyStore(args.db), token, seed=k, think=args.think, on_submit=printed))

    threads = [threading.Thread(target=one, args=(k, t)) for k, t in enumerate(args.token)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for run in runs:
        for error in run.errors:
            print(f"ERROR {error}", flush=True)
    print("DONE " + json.dumps({"answers": sum(len(r.submitted) for r in runs)}), flush=True)
    return 1 if any(r.errors for r in runs) else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        sys.exit(_worker_main(sys.argv[2:]))
    sys.exit("usage: python -m engine.annotation.studies.drills worker --db PATH --token T [--token T ...]")

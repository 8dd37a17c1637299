"""Load and crash drills for plausibility studies; the figures in docs/studies.md come from here.

    PYTHONPATH=. python scripts/tools/study_load.py            # 30 annotators, 3 processes; then the SIGKILL drill
    PYTHONPATH=. python scripts/tools/study_load.py --smoke    # small and quick (CI-sized)
    PYTHONPATH=. python scripts/tools/study_load.py --json out.json

Load drill: a study sized so that the annotators fill it exactly (tasks = annotators * tasks per annotator /
overlap), every annotator starting at the same instant, each through its own StudyStore (the engine path the
dashboard's annotator page calls: open_session, next_assignment, submit), spread over processes with one
thread per annotator inside each. It checks that every acknowledged answer is stored, that every task has
exactly its overlap and that nobody got an item twice, and reports throughput and latencies.

Crash drill: one process answers for several annotators at once and is SIGKILLed after K acknowledged
answers; every acknowledged answer must be in the file (and SQLite's integrity check pass); a new process with
the same links then resumes and finishes the study.

Exit status 1 when an invariant fails. The database is a temporary file (or --db).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="a small quick run (12 annotators, 2 processes)")
    p.add_argument("--annotators", type=int, default=30)
    p.add_argument("--tasks-per-annotator", type=int, default=6)
    p.add_argument("--overlap", type=int, default=3)
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--think", type=float, default=0.0, help="mean seconds an annotator waits before answering")
    p.add_argument("--crash-annotators", type=int, default=6)
    p.add_argument("--kill-after", type=int, default=15, help="acknowledged answers before the SIGKILL")
    p.add_argument("--db", default=None, help="folder for the databases (default: a temporary one)")
    p.add_argument("--json", default=None, help="also write the figures here")
    args = p.parse_args(argv)
    if args.smoke:
        args.annotators, args.tasks_per_annotator, args.overlap, args.processes = 12, 3, 2, 2
        args.crash_annotators, args.kill_after = 3, 4

    from engine.annotation.studies.drills import run_crash, run_load
    from engine.atomic import write_text

    folder = args.db or tempfile.mkdtemp(prefix="study-load-")
    os.makedirs(folder, exist_ok=True)
    load = run_load(os.path.join(folder, "load.sqlite3"), annotators=args.annotators,
                    tasks_per_annotator=args.tasks_per_annotator, overlap=args.overlap, processes=args.processes,
                    think=args.think)
    crash = run_crash(os.path.join(folder, "crash.sqlite3"), annotators=args.crash_annotators, kill_after=args.kill_after)
    figures = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
               "command": "python scripts/tools/study_load.py " + " ".join(argv if argv is not None else sys.argv[1:]),
               "load": load, "crash": crash}
    ok = (not load["errors"] and load["lost"] == 0 and load["tasks_over"] == 0 and load["duplicate_items"] == 0
          and load["tasks_exact"] == load["tasks"] and crash["killed"]["lost"] == [] and crash["resume_returncode"] == 0
          and crash["final"]["tasks_exact"] == crash["final"]["tasks"] and crash["final"]["tasks_over"] == 0)
    print(f"load: {load['annotators']} annotators in {load['processes']} processes (all started within "
          f"{load['start_spread_seconds']} s) answered {load['acknowledged']} items "
          f"in {load['wall_seconds']} s ({load['answers_per_second']}/s); submit median {load['submit_ms_median']} ms, "
          f"p95 {load['submit_ms_p95']} ms; next-task median {load['next_ms_median']} ms, p95 {load['next_ms_p95']} ms")
    print(f"      lost {load['lost']}, errors {len(load['errors'])}, tasks at exactly overlap {load['overlap']}: "
          f"{load['tasks_exact']}/{load['tasks']}, over {load['tasks_over']}, items given twice {load['duplicate_items']}, "
          f"integrity {load['integrity']}")
    k, f = crash["killed"], crash["final"]
    print(f"crash: SIGKILL after {k['acknowledged']} acknowledged answers -> {k['stored']} stored, lost {len(k['lost'])}, "
          f"integrity {k['integrity']}; resumed: tasks at exactly overlap {f['tasks_exact']}/{f['tasks']}, over "
          f"{f['tasks_over']}, items given twice {f['duplicate_items']}")
    print("OK" if ok else "FAILED")
    if args.json:
        write_text(args.json, json.dumps(figures, indent=2))  # atomically, like every file the engine writes
    return 0 if ok else 1


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    sys.exit(main())

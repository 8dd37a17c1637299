"""`python -m engine study create|invite|status|export|close|exclude`: plausibility studies from the command line."""
from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap

from engine.cli.arguments import annotation_database, database_options

HELP = "run a plausibility study: create it, invite annotators, follow progress and quality, export results"

DESCRIPTION = textwrap.dedent("""\
    A plausibility study asks many annotators to rank anonymised explanations (and/or mark rationales) of a
    model's decisions. The study fixes which examples, which measures, how many tasks each annotator gets and how
    many annotators see each task (the overlap); each annotator is given their tasks one at a time, atomically,
    so that every task is answered by exactly `overlap` people. Attention checks are mixed in.

    Workflow:
      1. python -m engine study create --model tiny-rt-masked-s0 --measures grad-l2 loo-sign random \\
             --examples 20 --tasks-per-annotator 10 --overlap 3 --checks 2
         # prints the study id and how many annotators it needs: ceil(20 * 3 / 10) = 6
      2. python -m engine study invite STUDY --names alice bob carol   # a personal link each, shown ONCE
         python -m engine study invite STUDY --open                    # one link for Prolific/MTurk
      3. annotators open their links on the dashboard (see docs/studies.md for serving it to a network)
      4. python -m engine study status STUDY         # progress, coverage, flags, ratings, agreement
         python -m engine study exclude STUDY NAME   # leave a careless annotator out of the results
      5. python -m engine study close STUDY
         python -m engine study export STUDY study.jsonl --csv answers.csv

    Studies live in the annotation database (annotations/annotations.sqlite3; ENGINE_ANNOTATIONS_DB or --db).
    Links carry a secret token: only its SHA-256 is stored, so a lost link cannot be shown again (invite anew).""")


def configure(p: argparse.ArgumentParser) -> None:
    """The `study` command and its subcommands."""
    p.description = DESCRIPTION
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
    sub = p.add_subparsers(dest="study_command", metavar="SUBCOMMAND")
    common = database_options()
    fmt = argparse.RawDescriptionHelpFormatter

    c = sub.add_parser("create", parents=[common], formatter_class=fmt, help="explain the examples and store a new open study",
                       description=textwrap.dedent("""\
                           Explain the chosen examples with each measure (the model's predicted class), store one task
                           per example and attention-check items, and open the study. Prints the study id.

                           Example:
                             python -m engine study create --model tiny-rt-masked-s0 --measures grad-l2 loo-sign random \\
                                 --examples 20 --tasks-per-annotator 10 --overlap 3 --checks 2 --time-limit 30
                           """))
    c.add_argument("--model", required=True, help="checkpoint id or registered model (python -m engine models list)")
    c.add_argument("--measures", nargs="+", required=True, help="importance measures to compare (2+ for rankings)")
    c.add_argument("--name", default=None, help="the title annotators see (default: 'Plausibility study'); do not put "
                   "the model's name here if annotators must not know it")
    c.add_argument("--dataset", default=None, help="dataset (default: the model's own)")
    c.add_argument("--split", default="test", help="split the examples come from (default test)")
    group = c.add_mutually_exclusive_group()
    group.add_argument("--examples", type=int, default=10, help="the split's first N examples (default 10)")
    group.add_argument("--example-ids", nargs="+", default=None, metavar="UID", help="these example uids instead")
    c.add_argument("--kinds", nargs="+", default=["ranking"], choices=["ranking", "rationale"],
                   help="what each task asks: rank the explanations, mark a rationale, or both (default ranking)")
    c.add_argument("--tasks-per-annotator", type=int, default=10, help="real tasks per annotator (default 10)")
    c.add_argument("--overlap", type=int, default=2, help="annotators per task (default 2)")
    c.add_argument("--checks", type=int, default=1, help="attention checks per annotator, on top of the tasks (default 1)")
    c.add_argument("--check-kind", default="instructed", choices=["instructed", "gold"],
                   help="instructed: the item says which explanation to put first; gold: the gold rationale against a "
                   "random one (needs rationales in the data, e.g. bAbI). Default instructed")
    c.add_argument("--instructions", default=None, help="instructions text (default: a standard paragraph)")
    c.add_argument("--instructions-file", default=None, help="read the instructions from this UTF-8 file")
    c.add_argument("--consent", default=None, help="consent text (default: a standard paragraph)")
    c.add_argument("--consent-file", default=None, help="read the consent text from this UTF-8 file")
    c.add_argument("--time-limit", type=float, default=None, metavar="MINUTES",
                   help="per annotator from their first visit; afterwards their unanswered tasks go to others")
    c.add_argument("--worker-param", default="PROLIFIC_PID", help="URL parameter with a crowd worker's id (default PROLIFIC_PID)")
    c.add_argument("--completion-code", default=None, help="the code shown when done (default: made up)")
    c.add_argument("--show", default="word", choices=["word", "token"],
                   help="what annotators see of each text: its words (default; each scored by the sum of its word "
                        "pieces) or the model's word pieces (me ##hta); recorded with the study")
    c.add_argument("--id", default=None, help="the study id (default: study-XXXXXX)")
    c.set_defaults(func=_create)

    i = sub.add_parser("invite", parents=[common], formatter_class=fmt, help="make personal links or the open crowd link",
                       description=textwrap.dedent("""\
                           Print one link per annotator (or the one open link). The token in a link is shown here once;
                           the database keeps only its hash. A personal link can be reopened to resume unless
                           --single-use. The open link takes the worker's id from the URL (PROLIFIC_PID by default)
                           and ends with the completion code; making a new open link revokes the old one.

                           Examples:
                             python -m engine study invite study-1a2b3c --names alice bob carol
                             python -m engine study invite study-1a2b3c --count 30 --base-url https://lab.example.org/
                             python -m engine study invite study-1a2b3c --open
                           """))
    i.add_argument("study", help="the study id")
    who = i.add_mutually_exclusive_group(required=True)
    who.add_argument("--names", nargs="+", help="annotator names (stored verbatim)")
    who.add_argument("--count", type=int, help="N links named annotator-1 ... annotator-N")
    who.add_argument("--open", action="store_true", help="the open link for crowd workers")
    i.add_argument("--single-use", action="store_true", help="a personal link opens one session only")
    i.add_argument("--base-url", default="http://localhost:8501/", help="the dashboard's address (default http://localhost:8501/)")
    i.add_argument("--json", action="store_true", help="print the links as JSON")
    i.set_defaults(func=_invite)

    s = sub.add_parser("status", parents=[common], help="progress, coverage, quality flags, ratings and agreement",
                       description="Without a study id, list the studies. With one: every task's answers against the "
                       "overlap, each annotator's progress and quality flags (failed attention checks, median seconds "
                       "per task, straight-lining), TrueSkill and Bradley-Terry ratings with bootstrap intervals over "
                       "annotators, Krippendorff's alpha and Kendall's W.")
    s.add_argument("study", nargs="?", default=None, help="the study id (omit to list studies)")
    s.add_argument("--exclude", default="marked", choices=["marked", "flagged", "none"],
                   help="leave out of ratings and agreement: the annotators marked with `study exclude` (default), "
                   "those and every flagged one, or none")
    s.add_argument("--bootstrap", type=int, default=200, help="bootstrap draws for the intervals (default 200; 0: none)")
    s.add_argument("--json", action="store_true", help="print everything as JSON")
    s.set_defaults(func=_status)

    e = sub.add_parser("export", parents=[common], help="write the study as JSONL (and answers as a formula-safe CSV)",
                       description="JSON lines: the study's design and provenance (code version, command line), its "
                       "tasks with measure names, attention checks, annotators with flags, every answer, and the results. "
                       "The CSV has one row per answer and slot; cells a spreadsheet would run as formulas are neutralised.")
    e.add_argument("study", help="the study id")
    e.add_argument("out", help="the JSONL file (replaced atomically)")
    e.add_argument("--csv", default=None, metavar="FILE", help="also write the answers as CSV")
    e.add_argument("--exclude", default="marked", choices=["marked", "flagged", "none"], help="as for status")
    e.add_argument("--bootstrap", type=int, default=200, help="bootstrap draws (default 200)")
    e.set_defaults(func=_export)

    x = sub.add_parser("close", parents=[common], help="close a study (links and answers refused; data kept)")
    x.add_argument("study", help="the study id")
    x.add_argument("--reopen", action="store_true", help="open a closed study again instead")
    x.set_defaults(func=_close)

    z = sub.add_parser("exclude", parents=[common], help="leave an annotator out of the results (or back in)")
    z.add_argument("study", help="the study id")
    z.add_argument("annotator", help="the annotator's name or worker id")
    z.add_argument("--reason", default=None, help="why (kept with the study)")
    z.add_argument("--undo", action="store_true", help="include them again")
    z.set_defaults(func=_exclude)


def _studies(args, create: bool = False):
    from engine.annotation.studies import StudyStore

    return StudyStore(annotation_database(args, create, "create a study first"))


def _read_text(text: str | None, path: str | None, default: str) -> str:
    from engine.errors import InvalidInputError

    if path:
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except (OSError, UnicodeDecodeError) as err:
            raise InvalidInputError(f"cannot read {path}: {err}") from None
    return default if text is None else text


def _create(args) -> int:
    from engine.annotation.studies import DEFAULT_CONSENT, DEFAULT_INSTRUCTIONS, StudyConfig, build_study_tasks
    from engine.errors import InvalidInputError
    from engine.models import CheckpointError

    config = StudyConfig(
        name=args.name or "Plausibility study", model_id=args.model, measures=tuple(args.measures), dataset=args.dataset,
        split=args.split, n_examples=None if args.example_ids else args.examples, example_ids=tuple(args.example_ids or ()),
        kinds=tuple(args.kinds), tasks_per_annotator=args.tasks_per_annotator, overlap=args.overlap,
        attention_checks=args.checks, check_kind=args.check_kind,
        instructions=_read_text(args.instructions, args.instructions_file, DEFAULT_INSTRUCTIONS),
        consent=_read_text(args.consent, args.consent_file, DEFAULT_CONSENT), time_limit_minutes=args.time_limit,
        worker_param=args.worker_param, completion_code=args.completion_code,
        shown_as=args.show).checked()
    studies = _studies(args, create=True)
    try:
        tasks = build_study_tasks(config)
    except CheckpointError as err:
        raise InvalidInputError(str(err)) from None
    study = studies.create(config, tasks, study_id=args.id, command_line=getattr(args, "command_line", None))
    print(f"created {study.id}: {study.n_tasks} tasks x overlap {config.overlap}, {config.tasks_per_annotator} tasks "
          f"+ {config.attention_checks} attention checks per annotator")
    print(f"it needs {study.annotators_needed} annotators; next: python -m engine study invite {study.id} --names ... "
          f"(or --open)")
    return 0


def _invite(args) -> int:
    studies = _studies(args)
    if args.open:
        issued = [studies.open_link(args.study)]
    else:
        names = args.names if args.names else [f"annotator-{k}" for k in range(1, (args.count or 0) + 1)]
        issued = studies.invite(args.study, names, single_use=args.single_use)
    rows = [{"annotator": inv.label, "kind": inv.kind, "single_use": inv.single_use, "url": inv.url(args.base_url)}
            for inv in issued]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    for row in rows:
        print(f"{row['annotator']}\t{row['url']}")
    if args.open:
        study = studies.study(args.study)
        print(f"completion code (shown to workers when they finish): {study.completion_code}")
    print("these links are shown once: only their hashes are stored", file=sys.stderr)
    return 0


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _table(title: str, rows: list[dict], columns: list[str]) -> None:
    print(f"\n{title}")
    if not rows:
        print("  (none yet)")
        return
    widths = [max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns]
    print("  " + "  ".join(c.rjust(w) for c, w in zip(columns, widths)))
    for row in rows:
        print("  " + "  ".join(_fmt(row.get(c)).rjust(w) for c, w in zip(columns, widths)))


def _status(args) -> int:
    from engine.annotation.studies.results import study_results

    studies = _studies(args)
    if args.study is None:
        rows = [{"id": s.id, "state": s.state, "name": s.name, "model": s.config.model_id, "tasks": s.n_tasks,
                 "overlap": s.config.overlap, "created": s.created_at[:19]} for s in studies.studies()]
        if args.json:
            print(json.dumps(rows, indent=2, ensure_ascii=False))
        else:
            _table("Studies", rows, ["id", "state", "model", "tasks", "overlap", "created", "name"])
        return 0
    data = study_results(studies, args.study, exclude=args.exclude, n_boot=args.bootstrap)
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False, default=str))
        return 0
    s, cov = data["study"], data["coverage"]
    print(f"{s['id']} ({s['state']}): {s['name']!r}, model {s['config']['model_id']}, measures {', '.join(s['config']['measures'])}")
    print(f"tasks answered exactly {cov['overlap']} times: {cov['complete']} of {cov['tasks']} (over: {cov['over']}); "
          f"{cov['remaining_answers']} answers still needed; {cov['annotators']} annotators of {cov['annotators_needed']} needed")
    rows = [{**a, "progress": f"{a['answered']}/{a['total']}", "checks": f"{a['checks'] - a['checks_failed']}/{a['checks']}",
             "flags": "; ".join(a["flags"]) or "-", "state": "released" if a["released"] else
             ("done" if a["finished"] else "working"), "excluded": "yes" if a["left_out"] else "no"}
            for a in data["annotators"]]
    _table("Annotators (checks passed/answered; flags are advice, `study exclude` decides)", rows,
           ["annotator", "state", "progress", "checks", "median_seconds", "straightline_share", "excluded", "flags"])
    r = data["ratings"]
    print(f"\nRatings from {r['annotators']} annotators (left out: {', '.join(data['excluded']) or 'none'}); "
          f"{int(r['level'] * 100)}% bootstrap intervals over annotators, {r['n_boot']} draws")
    _table("TrueSkill (ranked by mu - 3 sigma)", r["trueskill"],
           ["rank", "measure", "mu", "mu_low", "mu_high", "sigma", "conservative", "matches"])
    _table("Bradley-Terry (log strength, centred)", r["bradley_terry"],
           ["rank", "measure", "strength", "strength_low", "strength_high", "comparisons"])
    a = data["agreement"]
    print(f"\nAgreement: Krippendorff's alpha (ordinal, rankings) {_fmt(a['krippendorff_alpha_rankings'])}; "
          f"Kendall's W {_fmt(a['kendalls_w'])} (mean over {a['kendalls_w_tasks']} tasks); rationales: alpha "
          f"{_fmt(a['rationale']['alpha'])}, mean Cohen's kappa {_fmt(a['rationale']['mean_kappa'])}")
    return 0


def _export(args) -> int:
    from engine.annotation.studies.results import export_csv, export_jsonl

    studies = _studies(args)
    try:
        n = export_jsonl(studies, args.study, args.out, exclude=args.exclude, n_boot=args.bootstrap)
        print(f"wrote {n} records to {args.out}")
        if args.csv:
            export_csv(studies, args.study, args.csv)
            print(f"wrote the answers to {args.csv}")
    except OSError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def _close(args) -> int:
    studies = _studies(args)
    study = studies.reopen(args.study) if args.reopen else studies.close(args.study)
    print(f"{study.id} is {study.state}")
    return 0


def _exclude(args) -> int:
    studies = _studies(args)
    studies.set_excluded(args.study, args.annotator, excluded=not args.undo, reason=args.reason)
    print(f"{args.annotator} is {'included in' if args.undo else 'excluded from'} the results of {args.study}")
    return 0


def run(args: argparse.Namespace) -> int:
    return args.func(args)

"""A process that imports the heavy stack once (torch, transformers, pandas, scipy, captum, the engine) and runs each
Python entry of bench/ and scripts/ in a fork of itself, as `python ENTRY --smoke` would: its own process, argv,
`__main__`, `sys.path[0]` (the entry's folder), stdout and stderr, exit status and interpreter shutdown (atexit).

Why: the smoke test runs about 30 Python entries, and each fresh interpreter spent about 4 CPU-seconds importing
torch, transformers and the engine before its own work: more than a third of the smoke test's CPU time, on a
2-core machine where the suite is CPU-bound. A fork shares the imported modules copy-on-write.

Protocol (line-delimited JSON on stdin / stdout): {"entry": path, "args": [...], "out": file} -> {"pid": int} when
the child starts, then {"code": int} when it ends; the entry's stdout and stderr go to `out`. Started with the environment every entry gets (ENGINE_SMOKE=1 and the
rest: modules read it at import), from the project root."""
from __future__ import annotations

import json
import os
import runpy
import sys
import traceback


def _preload() -> None:
    # What the entries import; nothing here starts a thread (a fork after OpenMP's pool exists would deadlock), so
    # only imports, no tensor work. With the model classes the entries build (tiny BERT; the Llama of SmolLM2 and of
    # engine.smoke.tiny_prompted), peft and the training schedule: about 2 CPU-seconds an entry when each fork imported them.
    import captum.attr  # noqa: F401
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import peft  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import scipy.stats  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401
    import transformers.models.bert.modeling_bert  # noqa: F401
    import transformers.models.llama.modeling_llama  # noqa: F401
    import transformers.optimization  # noqa: F401

    import engine.cli  # noqa: F401
    import engine.explain  # noqa: F401
    import engine.faithfulness  # noqa: F401
    import engine.importance  # noqa: F401
    import engine.models  # noqa: F401
    import engine.runtime  # noqa: F401
    import engine.smoke  # noqa: F401


def _run_child(request: dict) -> None:
    """In the forked child: become `python ENTRY ARGS` and never return (exits through the interpreter's own
    shutdown, so atexit handlers, pools' finalisers and buffered output run as in a fresh process)."""
    out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    entry = os.path.abspath(request["entry"])
    sys.argv = [entry, *request["args"]]
    sys.path[0] = os.path.dirname(entry)
    code = 0
    try:
        runpy.run_path(entry, run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, (int, type(None))):
            print(exit_.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 (an entry's failure is its exit status, as in a fresh interpreter)
        traceback.print_exc()
        code = 1
    raise SystemExit(code)


def main() -> None:
    _preload()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _run_child(request)  # raises SystemExit: the child unwinds out of this loop and exits
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    main()

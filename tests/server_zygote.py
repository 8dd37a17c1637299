"""A process that imports what a dashboard server imports (streamlit and its server, torch, transformers, pandas,
plotly, the engine and app/ modules the pages import) once, and starts each test's server as a fork of itself that
becomes `python -m streamlit run app/main.py ...`: the request's whole environment, cwd, argv, stdin from
/dev/null, stdout and stderr to a log file, and then Streamlit's own CLI, run as `python -m` runs it (so its
config, signal handling and page loading are its own). ServerZygote is the client tests/browser/test_browser.py's
`serve_app` uses; tests/browser/test_browser_server_zygote.py checks both.

Why: the browser tests start about twenty servers, and each fresh interpreter spent about 4 CPU-seconds importing
that stack before it served its first page, on a 2-core machine where the suite is CPU-bound. A fork shares the
imported modules copy-on-write (the same idea as tests/smoke_zygote.py for the smoke entries).

What keeps a fork what a fresh server would be:
- the preload only imports: no thread is started and no tensor work is done (a fork after OpenMP's pool exists
  deadlocks). The zygote refuses to start with a Python thread alive; the native threads some libraries start at
  import (pyarrow's jemalloc, OpenBLAS's pool when OMP_NUM_THREADS is not 1) have fork handlers of their own.
- the environment: modules read some variables at import (huggingface_hub its HF_* ones, tqdm every TQDM_*), so
  a zygote only serves requests whose environment equals the one it was started with (`serves`), except for
  the variables that may differ per request (`varies`: ENGINE_*, read when asked for by engine/settings.py, and
  pytest's PYTEST_CURRENT_TEST), and for variables its start lacked that its imports set, to the value they set,
  when nothing but the code that set them read them before (streamlit's MPLBACKEND, torch's cache folder, the
  setdefaults of engine/__init__.py and engine/runtime.py; which ones qualify is found at the start, not listed):
  a test process gets those too once it imports the same modules. The client starts
  another zygote for another environment. The zygote checks, watching os.environ during its imports, that they
  read none of the per-request variables and set none. A child's environment is the request's, plus what the
  imports set, exactly as they set it in the zygote from that same start environment.
- Python's `random` reseeds itself in a fork; numpy's global generator is reseeded here (a fresh interpreter
  seeds it from the OS). The hash seed (PYTHONHASHSEED) is the zygote's, and objects from the preload are frozen
  out of the garbage collector (gc.freeze, as Python's documentation advises before forking): neither changes what
  a page computes.
- `ps` shows a server under the zygote's command line (a fork keeps it).

Protocol (line-delimited JSON; requests on stdin, messages on stdout): {"op": "serve", "env": {...}, "args": [...],
"out": log file} -> {"started": pid} or {"error": text}; {"op": "signal", "pid": p, "sig": n} -> {"signalled": p,
"live": bool} (sent only while the zygote has not reaped p, so never to a recycled pid); and, whenever a server
ends, {"exited": pid, "code": status as subprocess reports it (-N: killed by signal N)}. EOF on stdin: the
zygote sends SIGTERM to its live servers, waits for them (SIGKILL after 20 s) and exits."""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":
    sys.path[0] = ROOT  # as `python -m` sets it: the working directory (the project root), not tests/

import atexit  # noqa: E402
import json  # noqa: E402
import select  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

STOP_S = 20.0  # how long a stopped server may take to exit before SIGKILL (serve_app's old proc.wait(timeout=20))


def varies(name: str) -> bool:
    """Whether an environment variable may differ between requests one zygote serves."""
    return name.startswith("ENGINE_") or name == "PYTEST_CURRENT_TEST"


def fixed_part(env: dict) -> dict:
    """The part of an environment that a zygote's imports may have read (see `serves`)."""
    return {k: v for k, v in env.items() if not varies(k)}


def serves(start: dict, interchangeable: dict, env: dict) -> bool:
    """Whether a zygote started with the fixed part `start` may serve a request with environment `env`: its fixed
    part is `start`'s, except for variables `start` lacked that the zygote's imports set, to the same value, with
    no other code reading them before (`interchangeable`, see _preload). A test process gets those when it imports
    the same modules (streamlit, engine/runtime.py, torch._dynamo) after its first server."""
    fixed = fixed_part(env)
    return (all(fixed.get(k) == v for k, v in start.items())
            and all(interchangeable.get(k) == v for k, v in fixed.items() if k not in start))


# -- the zygote process -------------------------------------------------------------------------------------------


def _page_imports() -> list[str]:
    """The modules app/main.py, app/*.py and pages/*.py import at their top level, in file order (parsed, not run:
    what the pages import when a session opens them)."""
    import ast

    names: list[str] = []
    files = [os.path.join(ROOT, "app", "main.py")]
    files += sorted(os.path.join(ROOT, "app", f) for f in os.listdir(os.path.join(ROOT, "app")) if f.endswith(".py"))
    files += sorted(os.path.join(ROOT, "pages", f) for f in os.listdir(os.path.join(ROOT, "pages")) if f.endswith(".py"))
    for path in files:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in tree.body:
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__":
                names.append(node.module)
    entries = {"app.main", "app.serve"}  # scripts, run by Streamlit (main) or by scripts/start.sh (serve)
    return [n for n in dict.fromkeys(names) if n not in entries]


def _preload() -> tuple[set[str], set[str]]:
    """Import the server's stack. Returns the VARYING variables the imports read one by one (a read of the whole
    environment, as tqdm's scan for TQDM_*, is no such read), and the variables the imports set that no code read
    while they were unset, but the code that then set them (os.environ.setdefault, torch's cache folder): a
    server started with such a variable already set to that value imports the same."""
    import importlib

    reads: set[str] = set()
    unset_reads: dict[str, list] = {}  # variable -> the code (frames) that read it while it was unset
    setters: dict[str, list] = {}  # variable -> the code that set it
    getitem, setitem = os._Environ.__getitem__, os._Environ.__setitem__

    def code(frame):  # the frame that reads or writes, above os.environ's own methods (get, setdefault, getenv)
        while frame.f_code.co_filename in ("<frozen os>", "<frozen _collections_abc>", os.__file__):
            frame = frame.f_back
        return frame

    def recording_get(self, key):
        frame = sys._getframe(1)
        if not isinstance(key, str) or frame.f_code.co_name in ("__iter__", "copy"):
            return getitem(self, key)
        if varies(key):
            reads.add(key)
        try:
            return getitem(self, key)
        except KeyError:
            unset_reads.setdefault(key, []).append(code(frame))
            raise

    def recording_set(self, key, value):
        setters.setdefault(key, []).append(code(sys._getframe(1)))
        setitem(self, key, value)

    os._Environ.__getitem__, os._Environ.__setitem__ = recording_get, recording_set
    try:
        # Streamlit first, as in `python -m streamlit` (it sets MPLBACKEND before anything imports matplotlib), and
        # the server it starts; then what app/main.py and the pages import; then what loading a model imports.
        for name in ("streamlit", "streamlit.web.cli", "streamlit.web.bootstrap", "streamlit.web.server",
                     "streamlit.web.server.starlette.starlette_server", *_page_imports(),
                     "torch", "transformers", "transformers.models.bert.modeling_bert"):
            importlib.import_module(name)
    finally:
        os._Environ.__getitem__, os._Environ.__setitem__ = getitem, setitem
    set_alone = {key for key, frames in setters.items()
                 if all(any(f is s for s in frames) for f in unset_reads.get(key, []))}
    return reads, set_alone


def _write(fd: int, message: dict) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _become_server(request: dict, proto: int, pidfds: dict, base_env: dict) -> None:
    """In the forked child: become `python -m streamlit ARGS` (never returns: Streamlit's CLI ends in SystemExit,
    which unwinds out of the zygote's loop, and the interpreter shuts down as a fresh one would)."""
    import runpy
    import types

    for fd in (proto, *pidfds):
        os.close(fd)
    out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.environ.clear()
    os.environ.update(base_env)
    os.environ.update({k: v for k, v in request["env"].items() if varies(k)})
    os.chdir(ROOT)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()  # a fresh interpreter seeds numpy's global generator from the OS
    main = types.ModuleType("__main__")  # an empty __main__, as the interpreter's; runpy fills it as `-m` does
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    sys.argv = ["-m", *request["args"]]
    runpy._run_module_as_main("streamlit", alter_argv=True)  # what `python -m streamlit` calls
    raise SystemExit(0)


def _stop_all(children: dict) -> None:
    """SIGTERM every live server, wait for them (SIGKILL after STOP_S), reap them."""
    for pid in children.values():
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_S
    while children:
        ready, _, _ = select.select(list(children), [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            for pid in children.values():
                os.kill(pid, signal.SIGKILL)
            deadline = float("inf")
        for fd in ready:
            os.waitpid(children.pop(fd), 0)
            os.close(fd)


def main() -> None:
    import gc
    import threading

    proto = os.dup(1)  # the protocol's channel; fd 1 becomes the zygote's log (stderr), so no import writes into it
    os.set_inheritable(proto, False)
    os.dup2(2, 1)
    start_env = dict(os.environ)
    reads, set_alone = _preload()
    wrote = sorted(k for k in os.environ if varies(k) and os.environ[k] != start_env.get(k))
    wrote += sorted(k for k in start_env if varies(k) and k not in os.environ)
    problems = [f"an import read {', '.join(sorted(reads))}" if reads else "",
                f"an import set {', '.join(wrote)}" if wrote else "",
                f"threads after the imports: {threading.enumerate()}" if threading.active_count() != 1 else ""]
    if any(problems):
        _write(proto, {"error": "the server zygote cannot fork servers safely: " + "; ".join(filter(None, problems))})
        return
    base_env = fixed_part(os.environ)  # the start environment plus what the imports set
    fixed = fixed_part(start_env)
    interchangeable = {k: v for k, v in base_env.items() if k not in fixed and k in set_alone}
    threads = [open(f"/proc/self/task/{t}/comm").read().strip() for t in sorted(os.listdir("/proc/self/task"))]
    gc.freeze()  # the preloaded objects stay shared: a child's collections neither scan nor copy them
    _write(proto, {"ready": True, "pid": os.getpid(), "modules": len(sys.modules), "threads": threads,
                   "interchangeable": interchangeable})
    children: dict[int, int] = {}  # pidfd -> pid, until reaped
    pending = b""
    while True:
        ready, _, _ = select.select([0, *children], [], [])
        for fd in ready:
            if fd != 0:
                pid = children.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                _write(proto, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})
                continue
            chunk = os.read(0, 65536)
            if not chunk:  # the tests are done (or their process died)
                _stop_all(children)
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                if request["op"] == "signal":
                    live = request["pid"] in children.values()
                    if live:
                        os.kill(request["pid"], request["sig"])
                    _write(proto, {"signalled": request["pid"], "live": live})
                    continue
                if not serves(fixed, interchangeable, request["env"]):
                    env = fixed_part(request["env"])
                    differ = sorted(k for k in set(fixed) | set(env) if fixed.get(k) != env.get(k))
                    _write(proto, {"error": f"this zygote was started with another environment ({', '.join(differ)})"})
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _become_server(request, proto, children, base_env)
                children[os.pidfd_open(pid)] = pid
                _write(proto, {"started": pid})


# -- the client ---------------------------------------------------------------------------------------------------


class ServerZygote:
    """A zygote started with `env` (its fixed part is the environment of every request it serves). Its messages
    are read from the pipe's descriptor directly (no read-ahead buffer), so a wait with a timeout sees one as soon
    as it is written; the exits it reports are kept (`exits`)."""

    def __init__(self, env: dict, log: str):
        self.fixed = fixed_part(env)
        self.log = log
        with open(log, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)], cwd=ROOT, env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, bufsize=0)
        self._pending = b""
        self.exits: dict[int, int] = {}
        ready = self._until(lambda m: "ready" in m or "error" in m, 300)
        if not (ready or {}).get("ready"):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"the server zygote did not start: {(ready or {}).get('error', 'no answer')}\n"
                               + self.output()[-3000:])
        self.pid, self.threads, self.interchangeable = ready["pid"], ready["threads"], ready["interchangeable"]

    def serves(self, env: dict) -> bool:
        return serves(self.fixed, self.interchangeable, env)

    def output(self) -> str:
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return f.read()

    def _message(self, timeout: float) -> dict | None:
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the server zygote exited ({self.proc.wait()}):\n{self.output()[-3000:]}")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        message = json.loads(line)
        if "exited" in message:
            self.exits[message["exited"]] = message["code"]
        return message

    def _until(self, wanted, timeout: float) -> dict | None:
        """The first message `wanted` accepts within `timeout` s (exits on the way are kept), else None."""
        deadline = time.monotonic() + timeout
        while (message := self._message(max(0.0, deadline - time.monotonic()))) is not None:
            if wanted(message):
                return message
        return None

    def _request(self, request: dict, wanted) -> dict:
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        reply = self._until(lambda m: wanted(m) or "error" in m, 60)
        if reply is None or "error" in reply:
            raise RuntimeError(f"the server zygote did not answer {request['op']}: {reply}")
        return reply

    def serve(self, args: list[str], env: dict, out: str) -> int:
        """The pid of `python -m streamlit ARGS` started with environment `env`, its output going to `out`."""
        return self._request({"op": "serve", "args": args, "env": env, "out": out}, lambda m: "started" in m)["started"]

    def exit_code(self, pid: int, timeout: float = 0.0) -> int | None:
        """The server's exit status once the zygote has reported it (waiting up to `timeout` s), else None."""
        if pid not in self.exits:
            self._until(lambda m: m.get("exited") == pid, timeout)
        return self.exits.get(pid)

    def signal(self, pid: int, sig: int) -> bool:
        """Send `sig` to the server `pid` if it has not ended; whether it had not."""
        if pid in self.exits:
            return False
        return self._request({"op": "signal", "pid": pid, "sig": int(sig)}, lambda m: m.get("signalled") == pid)["live"]

    def stop(self, pid: int, timeout: float = STOP_S) -> int:
        """SIGTERM the server and wait for its exit; SIGKILL after `timeout` s (then raise TimeoutExpired, as
        subprocess's wait would). Its exit status."""
        self.signal(pid, signal.SIGTERM)
        code = self.exit_code(pid, timeout)
        if code is None:
            self.signal(pid, signal.SIGKILL)
            self.exit_code(pid, 60)
            raise subprocess.TimeoutExpired(f"streamlit server {pid}", timeout)
        return code

    def close(self) -> None:
        """EOF to the zygote: it stops any server still running and exits."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=STOP_S + 30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


_ZYGOTES: list[ServerZygote] = []
_LOGS: list[str] = []


def log_dir() -> str:
    """This test process's folder of server and zygote logs (removed when it exits)."""
    if not _LOGS:
        _LOGS.append(tempfile.mkdtemp(prefix="engine-servers-"))
    return _LOGS[0]


def zygote_for(env: dict) -> ServerZygote:
    """This test process's zygote for the environment `env` (see `serves`), started on first use."""
    for zygote in _ZYGOTES:
        if zygote.serves(env):
            return zygote
    if not _ZYGOTES:
        atexit.register(_close_all)
    _ZYGOTES.append(ServerZygote(env, os.path.join(log_dir(), f"zygote-{len(_ZYGOTES)}.log")))
    return _ZYGOTES[-1]


def _close_all() -> None:
    for zygote in _ZYGOTES:
        zygote.close()
    _ZYGOTES.clear()
    for folder in _LOGS:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

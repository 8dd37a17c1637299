"""The server zygote (tests/server_zygote.py) that every browser test's server is forked from: what it reports and
what its forks are. (In tests/browser/: slow, as it starts servers; it needs no browser.)"""
from __future__ import annotations

import json
import os
import signal
import socket
import time
import urllib.request
from pathlib import Path

import pytest
from server_zygote import ROOT, varies, zygote_for

# the variables the zygote's imports set (streamlit: MPLBACKEND; engine/runtime.py: the offline hub and the rest;
# torch._dynamo: its cache folder), which a fresh `python -m streamlit` server sets the same way when it imports them
IMPORT_SET = {"MPLBACKEND", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY", "TOKENIZERS_PARALLELISM",
              "CUBLAS_WORKSPACE_CONFIG", "TORCHINDUCTOR_CACHE_DIR"}

# An ASGI script: `streamlit run` imports it when the server starts (no browser session needed), so what the
# forked server's process is shows at /probe.
PROBE = """\
import os, random, sys
import numpy
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

print("probe imported", flush=True)
STATE = {"env": dict(os.environ), "cwd": os.getcwd(), "argv": sys.argv, "main": sys.modules["__main__"].__spec__.name,
         "pid": os.getpid(), "stdin": os.readlink("/proc/self/fd/0"), "stdout": os.readlink("/proc/self/fd/1"),
         "numpy": int(numpy.random.randint(2**31)), "random": random.random()}


async def probe(request):
    return JSONResponse(STATE)


app = Starlette(routes=[Route("/probe", probe)])
"""


def _environment(**extra) -> dict:
    """This process's environment with `extra`, after serve_app's import of engine.runtime (its offline defaults),
    so that these tests use the zygote serve_app does."""
    import engine.runtime  # noqa: F401

    return dict(os.environ, **extra)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _args(script: Path, port: int) -> list[str]:
    return ["run", str(script), "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
            "--browser.gatherUsageStats", "false", "--", "--probe-flag"]


def _probe(zygote, pid: int, port: int, out: Path) -> dict:
    deadline = time.time() + 60
    while time.time() < deadline:
        assert zygote.exit_code(pid) is None, f"the probe server exited:\n{out.read_text()}"
        try:
            return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/probe", timeout=2).read())
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"the probe server did not answer:\n{out.read_text()}")


def test_a_forked_server_is_streamlit_run_with_the_requests_environment_and_its_exit_is_reported(tmp_path):
    """A server forked from the zygote is `python -m streamlit run SCRIPT ARGS` as serve_app's Popen was: Streamlit's
    own CLI (argv parsed by it, `__main__` is streamlit's), cwd the project root, stdin /dev/null, stdout to the
    request's log; its environment is exactly the request's (a per-request variable reaches it, a variable of the
    zygote's own start does not), plus only what the imports set; two servers live at once are told apart (their
    own environments, their own random seeds); a server that crashes at start is reported with its exit status and
    output, a stopped (SIGTERM) or killed one with its status. Fails if the zygote served a stale or shared
    environment, ran its forks otherwise than Streamlit's CLI, lost an exit or reported it for the wrong server."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    (tmp_path / "crash.py").write_text(PROBE + "raise RuntimeError('probe crashed at start')\n")
    env_a = _environment(ENGINE_ZYGOTE_PROBE="a", ENGINE_ZYGOTE_ONLY_A="1")
    env_b = _environment(ENGINE_ZYGOTE_PROBE="b")
    zygote = zygote_for(env_a)
    assert zygote is zygote_for(env_b), "one zygote serves environments that differ only in ENGINE_* variables"
    # streamlit sets MPLBACKEND=Agg at import: a zygote started with or without it serves a request with it
    assert zygote.serves(dict(env_b, **zygote.interchangeable)) and zygote.serves(dict(env_b, MPLBACKEND="Agg"))
    for other in ({"HF_HOME": str(tmp_path)}, {"TOKENIZERS_PARALLELISM": "true"}):
        assert not zygote.serves(dict(env_b, **other)), f"a variable an import may read decides the zygote: {other}"
        with pytest.raises(RuntimeError, match="started with another environment"):
            zygote.serve(_args(script, _port()), dict(env_b, **other), str(tmp_path / "refused.log"))
    with open(f"/proc/{zygote.pid}/environ", "rb") as f:  # the zygote's start environment
        start = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    stale = {k.decode() for k in start if varies(k.decode())} - {"ENGINE_ZYGOTE_PROBE"}
    assert stale, "conftest.py sets ENGINE_DEVICE in every test process"
    env_b = {k: v for k, v in env_b.items() if k not in stale}  # request b lacks every per-request variable the zygote had

    servers = {}
    for name, env in (("a", env_a), ("b", env_b)):
        port, out = _port(), tmp_path / f"{name}.log"
        pid = zygote.serve(_args(script, port), env, str(out))
        servers[name] = (pid, port, out, env)
    seen = {name: _probe(zygote, pid, port, out) for name, (pid, port, out, _) in servers.items()}
    for name, (pid, _, out, env) in servers.items():
        state = seen[name]
        assert state["pid"] == pid and state["cwd"] == ROOT and state["main"] == "streamlit.__main__"
        assert state["argv"] == [str(script), "--probe-flag"], state["argv"]
        assert state["stdin"] == os.devnull and state["stdout"] == str(out)
        assert "probe imported" in out.read_text()
        changed = {k for k in set(state["env"]) | set(env) if state["env"].get(k) != env.get(k)}
        assert changed <= IMPORT_SET, f"server {name}'s environment is not its request's: {sorted(changed)}"
    assert seen["a"]["env"]["ENGINE_ZYGOTE_ONLY_A"] == "1" and not stale & set(seen["b"]["env"]), "b has its own"
    assert seen["a"]["numpy"] != seen["b"]["numpy"] and seen["a"]["random"] != seen["b"]["random"], "own seeds"

    port, out = _port(), tmp_path / "crash.log"
    crashed = zygote.serve(_args(tmp_path / "crash.py", port), env_b, str(out))
    assert zygote.exit_code(crashed, 60) == 1 and "probe crashed at start" in out.read_text(), out.read_text()
    port, out = _port(), tmp_path / "missing.log"
    missing = zygote.serve(_args(tmp_path / "missing.py", port), env_b, str(out))
    assert zygote.exit_code(missing, 60) == 2 and "File does not exist" in out.read_text(), out.read_text()

    pid_a, pid_b = servers["a"][0], servers["b"][0]
    # uvicorn (an ASGI script's server) ends a graceful stop by raising the signal again, as under a fresh
    # `python -m streamlit run`: status -15
    assert zygote.stop(pid_a) == -signal.SIGTERM and zygote.exit_code(pid_b) is None, "a SIGTERM stops that server only"
    assert _probe(zygote, pid_b, servers["b"][1], servers["b"][2])["pid"] == pid_b
    assert zygote.signal(pid_b, signal.SIGKILL) and zygote.exit_code(pid_b, 60) == -9
    assert not zygote.signal(pid_b, signal.SIGTERM), "an ended server is not signalled (its pid may be another's)"


def test_serve_app_serves_the_dashboard_stops_it_and_shows_why_one_did_not_come_up(tmp_path, monkeypatch):
    """serve_app (tests/browser_helpers.py) on the zygote: app/main.py answers the health check and exits 0 on the
    SIGTERM at the end; a server that cannot start (its port taken) fails the test at once with its own output."""
    import browser_helpers

    zygote = zygote_for(_environment())  # serve_app's: its environment differs from this one in ENGINE_* only
    before = set(zygote.exits)
    with browser_helpers.serve_app(tmp_path / "cache", tmp_path / "results") as url:
        assert urllib.request.urlopen(f"{url}/_stcore/health", timeout=10).read() == b"ok"
    assert [zygote.exits[pid] for pid in set(zygote.exits) - before] == [0]

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setattr(browser_helpers, "free_port", lambda: taken.getsockname()[1])
        start = time.monotonic()
        with pytest.raises(pytest.fail.Exception, match=r"(?s)did not come up \(exit status 1\).*is not available"):
            with browser_helpers.serve_app(tmp_path / "cache", tmp_path / "results"):
                pass
    assert time.monotonic() - start < 60, "an exit is seen when it is reported, not at the 90 s deadline"

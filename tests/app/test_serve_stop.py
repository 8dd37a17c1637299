"""The dashboard's server stops when told: `python -m app.serve` (what scripts/start.sh and the study drill run)
exits within its bound after SIGTERM even while a browser that stopped reading is connected (plain `streamlit run`
printed "Stopping..." and waited for it until SIGKILL); and scripts/start.sh refuses an open bind without a secret
before it builds anything."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from app import admin, serve

ROOT = Path(__file__).resolve().parents[2]
# A page that keeps sending 200 kB messages for as long as it runs: a peer that stops reading fills the buffers.
STREAMING_PAGE = textwrap.dedent("""
    import time
    import streamlit as st
    blob = "x" * 200_000
    box = st.empty()
    for i in range(100_000):
        box.text(f"{i} " + blob)
        time.sleep(0.01)
""")
# A browser whose machine vanished: it opens the page, then reads (almost) nothing more.
STALLED_BROWSER = textwrap.dedent("""
    import sys, time
    from websockets.sync.client import connect
    from streamlit.proto.BackMsg_pb2 import BackMsg
    ws = connect(f"ws://127.0.0.1:{sys.argv[1]}/_stcore/stream", subprotocols=["streamlit"], max_queue=1,
                 open_timeout=60)
    msg = BackMsg()
    msg.rerun_script.query_string = ""
    msg.rerun_script.page_script_hash = ""
    ws.send(msg.SerializeToString())
    ws.recv(timeout=60)
    print("connected", flush=True)
    time.sleep(600)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_server_exits_on_sigterm_within_its_bound_with_a_stalled_browser_attached(tmp_path):
    page = tmp_path / "streaming.py"
    page.write_text(STREAMING_PAGE, encoding="utf-8")
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    server = subprocess.Popen([sys.executable, "-m", "app.serve", str(page), "--server.port", str(port),
                               "--server.address", "127.0.0.1", "--server.headless", "true",
                               "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    browser = None
    try:
        deadline = time.time() + 120
        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                assert time.time() < deadline and server.poll() is None, "the server did not come up"
                time.sleep(0.3)
        browser = subprocess.Popen([sys.executable, "-W", "ignore", "-c", STALLED_BROWSER, str(port)], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert browser.stdout.readline().strip() == "connected"
        time.sleep(3)  # the page streams on; the stalled peer lets the server's buffers fill
        browser.send_signal(signal.SIGSTOP)  # frozen: it neither reads nor closes
        time.sleep(2)
        start = time.time()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=serve.HARD_LIMIT_S + 10)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server was still running {time.time() - start:.0f} s after SIGTERM")
        assert time.time() - start <= serve.HARD_LIMIT_S + 5
        assert b"Stopping" in server.stdout.read()
    finally:
        for proc in (browser, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def test_start_script_refuses_an_open_bind_without_a_secret_before_building_a_model(tmp_path):
    """With an empty models cache, `start.sh --server.address 0.0.0.0` and no secret exits 2 at once with the
    reason: it never starts the default model's training (minutes)."""
    env = {k: v for k, v in os.environ.items() if k not in (admin.SECRET_ENV, admin.NETWORK_ENV)}
    env.update(ENGINE_MODELS_CACHE=str(tmp_path / "empty-cache"), ENGINE_USER_DIR=str(tmp_path / "user"))
    start = time.time()
    out = subprocess.run(["bash", "scripts/start.sh", "--server.address", "0.0.0.0"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Refusing to serve" in out.stderr
    assert "building the default one" not in out.stdout and not (tmp_path / "empty-cache").exists()
    assert time.time() - start < 120

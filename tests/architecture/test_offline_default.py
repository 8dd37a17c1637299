"""Nothing reaches a hub at run time from the tool's entry points (the CLI, the dashboard, scripts and benches, these
tests), and importing the engine changes nothing in the caller's process: the offline policy is
`engine.offline()` (engine/settings.py), which the entry points call, never `import engine`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HUB = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY")
ENGINE_OWNED = (*HUB, "TOKENIZERS_PARALLELISM", "CUBLAS_WORKSPACE_CONFIG")


def _run(code: str, **env) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ENGINE_OWNED}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().split("\n")[-1]


def test_importing_the_engine_changes_no_environment_variable():
    """A notebook that imports the engine (its package face, models, explain, runtime, the sweeps) keeps its
    environment: no variable added or changed (before, `import engine` set the three hub variables and
    engine.runtime TOKENIZERS_PARALLELISM and CUBLAS_WORKSPACE_CONFIG for the whole process), and the hub stays
    online for its other Hugging Face code."""
    code = ("import json, os\nbefore = dict(os.environ)\n"
            "import engine, engine.models, engine.explain, engine.runtime, engine.sweeps.executor\n"
            "engine.load_classifier\n"  # a lazy name resolved: the import it triggers sets nothing either
            "import huggingface_hub.constants as c\n"
            "changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))\n"
            "print(json.dumps([changed, c.HF_HUB_OFFLINE]))")
    changed, hub_offline = json.loads(_run(code))
    assert changed == [] and hub_offline is False


@pytest.mark.parametrize("first", ["engine.models", "transformers", "app.shared"])
def test_offline_holds_whatever_was_imported_before_it(first):
    """huggingface_hub reads its variables once, at import: `engine.offline()` after it was imported (by the engine,
    by transformers, by the dashboard's modules) still turns the hub off (its constants set) and telemetry off."""
    code = (f"import {first}\nimport engine\nengine.offline()\nimport huggingface_hub.constants as c\n"
            "from transformers.utils.hub import is_offline_mode\n"
            "print(c.HF_HUB_OFFLINE, c.HF_HUB_DISABLE_TELEMETRY, is_offline_mode())")
    assert _run(code) == "True True True"


def test_a_user_who_sets_the_variable_keeps_their_choice():
    code = "import engine.models\nimport engine\nengine.offline()\nimport huggingface_hub.constants as c\nprint(c.HF_HUB_OFFLINE)"
    assert _run(code, HF_HUB_OFFLINE="0") == "False"


@pytest.mark.parametrize("entry", ["cli", "app"])
def test_the_entry_points_are_offline(entry):
    """`python -m engine` (its main) and the dashboard's main module call offline(): after them the hub is off."""
    call = {"cli": "from engine.cli import main\n    try:\n        main(['models', '--help'])\n"
                   "    except SystemExit:\n        pass\n",
            "app": "from streamlit.testing.v1 import AppTest\n"
                   "    AppTest.from_file('app/main.py', default_timeout=120).run()\n"}[entry]
    code = ("import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()):\n    " + call
            + "import os, huggingface_hub.constants as c\nprint(c.HF_HUB_OFFLINE, os.environ.get('HF_HUB_OFFLINE'))")
    assert _run(code) == "True 1"


def test_ray_workers_get_the_drivers_offline_policy(monkeypatch):
    """A Ray worker imports the engine, which sets nothing: the runtime environment carries the hub variables the
    driver's entry point set."""
    from engine.sweeps.executor import ray_runtime_env

    for name in HUB:
        monkeypatch.setenv(name, "1")
    env = ray_runtime_env()["env_vars"]
    assert all(env[name] == "1" for name in HUB)

"""Nothing reaches a hub at run time: whichever engine module a program imports first, huggingface_hub (which reads
its variables once, at import) is offline, unless the user set the variables themselves."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HUB = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY")


def _hub_offline_after_importing(module: str, **env) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in HUB}
    code = (f"import {module}\nimport huggingface_hub.constants as c\n"
            "print(c.HF_HUB_OFFLINE, c.HF_HUB_DISABLE_TELEMETRY)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split("\n")[-2]


@pytest.mark.parametrize("module", ["engine.models", "engine.explain", "app.shared", "engine.runtime"])
def test_the_hub_is_offline_whichever_engine_module_comes_first(module):
    """engine.models imports transformers before engine.runtime: the hub's constants were read with no offline
    variable set (HF_HUB_OFFLINE False) until the package itself set them."""
    assert _hub_offline_after_importing(module) == "True True"


def test_a_user_who_sets_the_variable_keeps_their_choice():
    assert _hub_offline_after_importing("engine.models", HF_HUB_OFFLINE="0").startswith("False")

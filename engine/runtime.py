"""Process-wide runtime choices: device, CPU threads, seeding, code version, quiet libraries.

Kept in one place so every entry point (CLI, dashboard, tests) behaves the same.
"""
from __future__ import annotations

import os
import random
import subprocess
from functools import lru_cache

import numpy as np
import torch

from engine import __version__, settings
from engine.errors import InvalidInputError
from engine.settings import PROJECT_ROOT  # noqa: F401 (re-exported)

# Nothing may reach a hub at run time: the machines are offline, and a silent download attempt
# costs a long timeout before failing. Users with a network can override these variables.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_configured = False


def configure() -> None:
    """Quiet transformers' load reports and set CPU threads: torch's default (the machine's cores) unless
    `ENGINE_THREADS` asks for a number (sweep workers divide the cores that way). Idempotent."""
    global _configured
    if _configured:
        return
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    threads = settings.threads_request()
    if threads is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    _configured = True


def pick_device(requested: str | None = None) -> torch.device:
    """`cuda` when available (or when asked), else `cpu`. `requested` may be 'auto', 'cpu', 'cuda'."""
    requested = (requested or settings.device_request()).lower()
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidInputError(f"device {requested!r} was asked for but CUDA is not available on this machine")
    if requested not in ("cpu",) and not requested.startswith("cuda"):
        raise InvalidInputError(f"unknown device {requested!r}: use auto, cpu or cuda")
    return torch.device(requested)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


@lru_cache(maxsize=1)
def code_version() -> str:
    """Package version plus the git commit (and '-dirty' when the tree has changes), recorded in
    every checkpoint and result so a number can be traced to the code that made it."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        return f"{__version__}+{commit}{'-dirty' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        return __version__

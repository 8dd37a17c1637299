"""Process-wide runtime choices: device, CPU threads, seeding, code version, quiet libraries.

Kept in one place so every entry point (CLI, dashboard, tests) behaves the same.
"""
from __future__ import annotations

import hashlib
import os
import random
import subprocess
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

import engine.settings as settings
from engine.errors import InvalidInputError
from engine.settings import PROJECT_ROOT
from engine.version import __version__

if TYPE_CHECKING:
    import torch

# torch is imported by the functions that use it: the code version and the settings are read by entry points that
# compute nothing (the dashboard's frame and its pages of stored results), which then need not import it.
# Importing this module sets no environment variable (tests/architecture/test_offline_default.py): the hub's offline policy is
# `settings.offline()`, called by the entry points; TOKENIZERS_PARALLELISM is set by `configure`; cuBLAS's workspace
# by `set_determinism`, which `pick_device` calls before the first CUDA kernel.

_configured = False


def configure() -> None:
    """Quiet transformers' load reports and set CPU threads: torch's default (the machine's cores) unless
    `ENGINE_THREADS` asks for a number (sweep workers divide the cores that way). Idempotent."""
    global _configured
    if _configured:
        return
    # the tokenizers' own thread pool beside torch's and the sweeps' forked workers: it warns and can deadlock there
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    threads = settings.threads_request()
    if threads is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    # The code version is read once, now, when the entry starts with the code it imported: read at the end of a long
    # run (when a checkpoint or result is saved) it named whatever the checkout held by then.
    code_version()
    _configured = True


def pick_device(requested: str | None = None) -> torch.device:
    """`cuda` when available (or when asked), else `cpu`. `requested` may be 'auto', 'cpu', 'cuda'.

    Picking CUDA turns deterministic algorithms on first (`ENGINE_DETERMINISTIC`, on by default), so no
    CUDA kernel runs before they are: `index_add_`, `scatter_add_` and the LSTM's gather backward
    accumulate in a nondeterministic order on a GPU otherwise."""
    import torch

    requested = (requested or settings.device_request()).lower()
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidInputError(f"device {requested!r} was asked for but CUDA is not available on this machine")
    if requested not in ("cpu",) and not requested.startswith("cuda"):
        raise InvalidInputError(f"unknown device {requested!r}: use auto, cpu or cuda")
    device = torch.device(requested)
    if device.type == "cuda":
        set_determinism(settings.deterministic_request())
    return device


def set_determinism(on: bool) -> None:
    """Deterministic algorithms (and cuDNN's deterministic kernels, without autotuning) on or off. Sets
    CUBLAS_WORKSPACE_CONFIG first: cuBLAS reads it once, when it starts (before the first CUDA matmul), and with it
    and deterministic algorithms on a CUDA rerun gives the same bits.

    warn_only: an op with no deterministic kernel warns instead of stopping the run; the flag is recorded
    with every result (`determinism()`), so a number from such a run can be told apart. On a CPU the
    engine's kernels are deterministic for a fixed thread count either way."""
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(bool(on), warn_only=True)
    torch.backends.cudnn.deterministic = bool(on)
    torch.backends.cudnn.benchmark = False if on else torch.backends.cudnn.benchmark


def determinism() -> dict:
    """The flags that decide whether a rerun gives the same bits, as recorded in provenance."""
    import torch

    return {
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "torch_threads": torch.get_num_threads(),
    }


def runtime_record(device: torch.device | str | None = None) -> dict:
    """Device (with the GPU's name), versions and the determinism flags: what provenance records about the
    machine a number was computed on."""
    import torch
    import transformers

    record = {"device": str(device) if device is not None else None, "torch": torch.__version__,
              "transformers": transformers.__version__, "cuda": torch.version.cuda}
    if device is not None and torch.device(device).type == "cuda" and torch.cuda.is_available():
        record["gpu"] = torch.cuda.get_device_name(torch.device(device))
    record.update(determinism())
    return record


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


#: The files that compute: "dirty" is decided over these only. Runs write tracked files under results/ themselves, and
#: docs or tests may change beside a run; neither changes a number (docs/methods.md#notes-behind-the-code).
CODE_PATHS = ("engine", "scripts", "bench", "app", "pages", "pyproject.toml", ":(glob)requirements*.txt")
#: Marks a code version whose code no commit holds; the 12 hex digits after it name the uncommitted code diff.
DIRTY_MARK = "-dirty"


def _git(*args: str, binary: bool = False):
    out = subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, timeout=30, check=True).stdout
    return out if binary else out.decode("utf-8", "replace").strip()


def code_diff_sha256() -> str | None:
    """12 hex digits of sha256 over the uncommitted changes to `CODE_PATHS` (the tracked diff against HEAD, then each
    untracked, not ignored file's path and bytes, in order), or None when the code is as committed."""
    status = _git("status", "--porcelain", "--untracked-files=all", "--", *CODE_PATHS)
    if not status:
        return None
    digest = hashlib.sha256(_git("diff", "HEAD", "--binary", "--", *CODE_PATHS, binary=True))
    for line in sorted(status.splitlines()):
        if line.startswith("?? "):
            path = line[3:].strip('"')
            digest.update(path.encode("utf-8"))
            digest.update((PROJECT_ROOT / path).read_bytes())
    return digest.hexdigest()[:12]


@lru_cache(maxsize=1)
def code_version() -> str:
    """Package version plus the git commit, recorded in every checkpoint and result so a number can be traced to the
    code that made it: `0.1.0+<commit>` when the code (`CODE_PATHS`) is as committed, `0.1.0+<commit>-dirty.<diff>`
    when it is not (<diff>: `code_diff_sha256`, so two runs of the same uncommitted code say so). Changes outside the
    code (results/, docs/, tests/) leave it clean."""
    try:
        commit = _git("rev-parse", "--short=12", "HEAD")
        diff = code_diff_sha256()
        return f"{__version__}+{commit}" + (f"{DIRTY_MARK}.{diff}" if diff else "")
    except (OSError, subprocess.SubprocessError):
        return __version__


def code_is_committed(version: str) -> bool:
    """Whether a recorded code version names code a commit holds (a commit, and no uncommitted code changes)."""
    return "+" in version and DIRTY_MARK not in version

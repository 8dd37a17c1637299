"""Every setting the engine reads from the environment, in one place (documented in docs/configuration.md).

Each is read when asked for, not at import. Some are asked for at each use, some when a model is loaded (the model
keeps what it was loaded with: ENGINE_DEVICE, ENGINE_DTYPE, ENGINE_ATTENTION, ENGINE_PREFIX_CACHE) and ENGINE_THREADS
once per process: docs/configuration.md says which.
No other module reads `ENGINE_*` variables.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from engine.errors import InvalidInputError

PROJECT_ROOT = Path(__file__).resolve().parent.parent

#: name -> (default as documented, what it sets)
SETTINGS = {
    "ENGINE_MODELS_CACHE": ("<project>/models_cache", "where trained checkpoints are written and looked up"),
    "ENGINE_RESULTS_DIR": ("<project>/results", "the results store the benchmark commands write and the pages read"),
    "ENGINE_ANNOTATIONS_DB": ("<project>/annotations/annotations.sqlite3", "the plausibility annotation database"),
    "ENGINE_GENERATIONS_DB": ("<project>/generations/generations.sqlite3", "the cache of language-model generations (self-explanations)"),
    "ENGINE_USER_DIR": ("<project>/user", "manifests of registered models and datasets (by reference, git-ignored)"),
    "ENGINE_DEVICE": ("auto", "auto (CUDA when available), cpu or cuda[:N]"),
    "ENGINE_DETERMINISTIC": ("1", "1: deterministic CUDA algorithms (bit-identical reruns); 0: the fastest kernels"),
    "ENGINE_THREADS": ("torch's default (the machine's cores)", "intra-op CPU threads of this process"),
    "ENGINE_DTYPE": ("auto", "dtype models run in: auto (float32, half-precision checkpoints upcast), stored, "
                     "float32, bfloat16 or float16 (GPU only)"),
    "ENGINE_ATTENTION": ("auto", "attention kernel: auto (SDPA where the architecture has it, eager for attention "
                         "weights), sdpa or eager"),
    "ENGINE_NETWORK": ("0", "1: the dashboard is served to a network even on a loopback bind (behind a reverse proxy)"),
    "ENGINE_PREFIX_CACHE": ("1", "1: a prompted LM computes the prompt before the input slot once per batch of perturbations "
                            "(key/value cache); 0: every row runs the whole prompt"),
    "ENGINE_ADMIN_SECRET": ("unset", "the dashboard's admin secret (else admin_secret in .streamlit/secrets.toml)"),
    "ENGINE_PUBLIC_MAX_ROWS": ("20000", "served to a network: model rows one visitor's request may use (Explain, masking)"),
    "ENGINE_PUBLIC_MAX_SECONDS": ("120", "served to a network: seconds one visitor's request may run"),
    "ENGINE_PUBLIC_PER_MINUTE": ("6", "served to a network: computations one browser session may start per minute"),
    "ENGINE_PUBLIC_CONCURRENT": ("2", "served to a network: visitors' computations running at once on the server"),
}
#: the public compute limits' defaults (app/limits.py applies them)
PUBLIC_LIMIT_DEFAULTS = {"ENGINE_PUBLIC_MAX_ROWS": 20_000, "ENGINE_PUBLIC_MAX_SECONDS": 120.0,
                         "ENGINE_PUBLIC_PER_MINUTE": 6, "ENGINE_PUBLIC_CONCURRENT": 2}


def _path(name: str, default: Path) -> Path:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else default


def models_cache_dir() -> Path:
    """Folder of the checkpoints trained here (`ENGINE_MODELS_CACHE`)."""
    return _path("ENGINE_MODELS_CACHE", PROJECT_ROOT / "models_cache")


def results_dir() -> Path:
    """Root of the results store (`ENGINE_RESULTS_DIR`)."""
    return _path("ENGINE_RESULTS_DIR", PROJECT_ROOT / "results")


def annotations_db_path() -> Path:
    """The annotation SQLite file (`ENGINE_ANNOTATIONS_DB`)."""
    return _path("ENGINE_ANNOTATIONS_DB", PROJECT_ROOT / "annotations" / "annotations.sqlite3")


def generations_db_path() -> Path:
    """The SQLite cache of generated text (`ENGINE_GENERATIONS_DB`)."""
    return _path("ENGINE_GENERATIONS_DB", PROJECT_ROOT / "generations" / "generations.sqlite3")


def user_dir() -> Path:
    """Folder of the user's registrations: models/ and datasets/ manifests (`ENGINE_USER_DIR`)."""
    return _path("ENGINE_USER_DIR", PROJECT_ROOT / "user")


def device_request() -> str:
    """The device asked for by `ENGINE_DEVICE` ('auto' when unset)."""
    return (os.environ.get("ENGINE_DEVICE") or "auto").lower()


def deterministic_request() -> bool:
    """Whether CUDA runs with deterministic algorithms (`ENGINE_DETERMINISTIC`, default 1)."""
    value = (os.environ.get("ENGINE_DETERMINISTIC") or "1").strip().lower()
    if value not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        raise InvalidInputError(f"ENGINE_DETERMINISTIC must be 1 or 0, got {value!r}")
    return value in ("1", "true", "yes", "on")


def dtype_request() -> str:
    """The dtype asked for by `ENGINE_DTYPE` ('auto' when unset; checked by engine.models.loading.choose_dtype)."""
    return (os.environ.get("ENGINE_DTYPE") or "auto").lower()


def attention_request() -> str:
    """The attention kernel asked for by `ENGINE_ATTENTION` ('auto' when unset; checked by
    engine.models.loading.choose_attention)."""
    return (os.environ.get("ENGINE_ATTENTION") or "auto").lower()


def network_request() -> bool:
    """Whether `ENGINE_NETWORK` says the dashboard is served to a network whatever its bind address."""
    return (os.environ.get("ENGINE_NETWORK") or "").strip().lower() in ("1", "true", "yes", "on")


def admin_secret_request() -> str | None:
    """The dashboard's admin secret from `ENGINE_ADMIN_SECRET`; None when unset or blank."""
    value = os.environ.get("ENGINE_ADMIN_SECRET")
    return value if value and value.strip() else None


def prefix_cache_enabled() -> bool:
    """Whether prompted LMs serve the shared prompt prefix from a key/value cache (`ENGINE_PREFIX_CACHE`, default 1)."""
    value = (os.environ.get("ENGINE_PREFIX_CACHE") or "1").strip().lower()
    if value not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        raise InvalidInputError(f"ENGINE_PREFIX_CACHE must be 1 or 0, got {value!r}")
    return value in ("1", "true", "yes", "on")


def public_limit_request(name: str) -> float:
    """One of the public compute limits (`ENGINE_PUBLIC_MAX_ROWS`, `_MAX_SECONDS`, `_PER_MINUTE`, `_CONCURRENT`):
    its value, or the default when unset; a value that is not a positive number is refused naming the variable."""
    if name not in PUBLIC_LIMIT_DEFAULTS:
        raise InvalidInputError(f"unknown public limit {name!r}; limits: {', '.join(PUBLIC_LIMIT_DEFAULTS)}")
    value = os.environ.get(name)
    if not value:
        return PUBLIC_LIMIT_DEFAULTS[name]
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not number > 0 or number != number or number == float("inf"):
        raise InvalidInputError(f"{name} must be a positive number, got {value!r}")
    return number


def threads_request() -> int | None:
    """Intra-op threads asked for by `ENGINE_THREADS`; None keeps torch's default (all the machine's cores)."""
    value = os.environ.get("ENGINE_THREADS")
    if not value:
        return None
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise InvalidInputError(f"ENGINE_THREADS must be a whole number >= 1, got {value!r}")
    return threads


def set_threads_for_workers(workers: int) -> None:
    """Divide the machine's cores between `workers` processes started after this call (each reads
    `ENGINE_THREADS`), unless the user fixed the threads already."""
    if "ENGINE_THREADS" not in os.environ:
        os.environ["ENGINE_THREADS"] = str(max(1, (os.cpu_count() or 1) // max(1, workers)))


#: The Hugging Face variables of the tool's offline policy: no hub request, no telemetry.
HUB_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY")


def _is_true(value: str | None) -> bool:
    return (value or "").strip().upper() in ("1", "ON", "YES", "TRUE")


def offline() -> None:
    """Nothing reaches the Hugging Face hub from this process: the tool's policy, set by its entry points (`python
    -m engine`, the dashboard, the scripts and benches, the tests), never by `import engine`, so a notebook that
    imports the engine keeps its own Hugging Face code online. Call it yourself to get the entry points' behaviour.

    Each of HUB_VARIABLES is set to 1 unless the user set it (a user with a network who sets HF_HUB_OFFLINE=0 keeps
    that). huggingface_hub reads them once, when it is imported, so where it is imported already its constants are
    set here the same way (transformers asks them at each call through `is_offline_mode`). Idempotent.

    Returns:
        None; the process's environment and huggingface_hub's constants are set as above."""
    for name in HUB_VARIABLES:
        os.environ.setdefault(name, "1")
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = _is_true(os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE"))
        constants.HF_HUB_DISABLE_TELEMETRY = constants.HF_HUB_DISABLE_TELEMETRY or _is_true(
            os.environ.get("HF_HUB_DISABLE_TELEMETRY"))

"""AttnLRP's propagation rules (Achtibat et al., ICML 2024) from the `lxt` package (2.1, "efficient" mode), switched
on for one thread for the length of one computation, then taken off again.

lxt implements AttnLRP as gradient x input with modified backward passes: an RMSNorm's 1/rms is held constant
(identity rule), the gated MLP's activation passes relevance unchanged (identity rule) and its product halves it
(uniform rule), and the attention's query, key and value gradients are divided by 4, 4 and 2 (uniform rule on the
two matrix products). Its own `lxt.efficient.monkey_patch(modeling_llama)` cannot be used here, for three reasons:

1. `import lxt` fails with transformers 5: the package's `__init__` imports every model it supports, among them a
   copy of transformers 4's BERT code that imports names transformers 5 removed, and a ViT module needing
   torchvision. So lxt's rule modules (`efficient/rules.py`, `efficient/patches.py`, `efficient/models/gemma3.py`)
   are loaded here from the installed files without running that `__init__` (`lxt_rules`).
2. `monkey_patch` replaces `modeling_llama.ALL_ATTENTION_FUNCTIONS` by a plain dict, on which transformers 5's
   attention modules call `.get_interface`: every forward would fail. Only the eager attention function is
   wrapped here (prompted LMs load with eager attention; another implementation is refused).
3. It rewrites the classes for the whole process with no undo, so every other measure (gradients, IG, DeepLIFT)
   of every Llama or Gemma 3 model in the process would silently change.

`lrp_rules(model)` instead installs, on first use, a dispatcher in place of each patched method that calls lxt's
version only in a thread that is inside `lrp_rules` and the original elsewhere; the last thread to leave puts the
original methods back (also when the computation raised). The rules act when the graph is built (forward), so a
backward pass later in the same thread is unaffected by other threads.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, wraps
from pathlib import Path

from engine.errors import NotApplicableError

LXT_VERSION = "2.1"
INSTALL_HINT = "pip install --no-deps lxt==2.1 (listed in requirements-models.txt; scripts/setup.sh installs it)"


@dataclass(frozen=True)
class Family:
    """One architecture lxt has AttnLRP rules for: the transformers module, the model types that use it and the
    classes whose methods lxt replaces (`norm_method` is the RMSNorm method lxt rewrites)."""

    name: str
    module: str
    model_types: tuple[str, ...]
    mlp: str
    norm: str
    norm_method: str


# lxt 2.1's efficient-mode families among causal LMs (efficient/models/__init__.py); its BERT and GPT-2 entries are
# not offered: BERT's is a copy of transformers 4's modeling code that does not import under transformers 5, and
# GPT-2's relies on the attention dispatch dict that transformers 5 replaced (see the module docstring).
FAMILIES = (
    Family("llama", "transformers.models.llama.modeling_llama", ("llama",), "LlamaMLP", "LlamaRMSNorm", "forward"),
    Family("gemma3", "transformers.models.gemma3.modeling_gemma3", ("gemma3_text", "gemma3"), "Gemma3MLP",
           "Gemma3RMSNorm", "_norm"),
    Family("qwen2", "transformers.models.qwen2.modeling_qwen2", ("qwen2",), "Qwen2MLP", "Qwen2RMSNorm", "forward"),
    Family("qwen3", "transformers.models.qwen3.modeling_qwen3", ("qwen3",), "Qwen3MLP", "Qwen3RMSNorm", "forward"),
)
SUPPORTED = ", ".join(f"{f.name} ({'/'.join(f.model_types)})" for f in FAMILIES)


def lxt_available() -> bool:
    """Whether the lxt package is installed (without importing it: its `__init__` fails under transformers 5)."""
    return importlib.util.find_spec("lxt") is not None


@lru_cache(maxsize=1)
def lxt_rules() -> types.SimpleNamespace:
    """lxt's rule functions: `patches` (efficient/patches.py: rms_norm_forward, gated_mlp_forward,
    wrap_attention_forward), `rules` (efficient/rules.py) and `gemma3_norm`, loaded from the installed package's
    files with its package `__init__` skipped (reason 1 of the module docstring). `sys.modules` is left as it was.

    Raises NotApplicableError with the install command when lxt is missing."""
    spec = importlib.util.find_spec("lxt")
    if spec is None or not spec.submodule_search_locations:
        raise NotApplicableError(f"AttnLRP needs the lxt package {LXT_VERSION}: {INSTALL_HINT}")
    root = Path(next(iter(spec.submodule_search_locations)))
    packages = {"lxt": root, "lxt.efficient": root / "efficient", "lxt.efficient.models": root / "efficient" / "models"}
    saved = {name: module for name, module in sys.modules.items() if name == "lxt" or name.startswith("lxt.")}
    try:
        for name, path in packages.items():  # empty packages: their submodules load without the real __init__
            package = types.ModuleType(name)
            package.__path__ = [str(path)]
            sys.modules[name] = package
        rules = importlib.import_module("lxt.efficient.rules")
        patches = importlib.import_module("lxt.efficient.patches")
        gemma3 = importlib.import_module("lxt.efficient.models.gemma3")
    finally:
        for name in [n for n in sys.modules if n == "lxt" or n.startswith("lxt.")]:
            del sys.modules[name]
        sys.modules.update(saved)
    return types.SimpleNamespace(rules=rules, patches=patches, gemma3_norm=gemma3.gemma3_norm)


def family_of(model) -> Family | None:
    """The lxt family of a transformers model (its config's model_type), or None."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    return next((f for f in FAMILIES if model_type in f.model_types), None)


def check_supported(model) -> tuple[bool, str]:
    """(True, '') when AttnLRP's rules cover `model`, else (False, why) naming what is supported."""
    family = family_of(model)
    if family is None:
        model_type = getattr(getattr(model, "config", None), "model_type", type(model).__name__)
        return False, (f"lxt {LXT_VERSION} has AttnLRP rules here for the causal LM families {SUPPORTED}; this model "
                       f"is {model_type!r}")
    implementation = getattr(model.config, "_attn_implementation", "eager")
    if implementation not in (None, "eager"):
        return False, (f"AttnLRP's attention rule wraps the eager attention only; this model runs {implementation!r} "
                       "(load it with attn_implementation='eager', as prompted models are)")
    if not lxt_available():
        return False, f"the lxt package is not installed: {INSTALL_HINT}"
    return True, ""


# -- the thread-scoped switch ------------------------------------------------------------------------------------
_active = threading.local()  # .depth: how many lrp_rules blocks this thread is inside
_lock = threading.Lock()
_users = 0  # threads x nesting currently inside lrp_rules (the dispatchers stay installed while > 0)
_originals: dict[tuple[object, str], tuple[object, bool]] = {}  # (owner, attribute) -> (original, owned by owner)


def _inside() -> bool:
    return getattr(_active, "depth", 0) > 0


def _dispatcher(original, lrp):
    """A stand-in for `original` that runs `lrp` in a thread inside `lrp_rules`, `original` everywhere else."""
    @wraps(original)
    def dispatch(*args, **kwargs):
        return (lrp if _inside() else original)(*args, **kwargs)
    dispatch.__lrp_dispatcher__ = True
    return dispatch


def _targets(family: Family, lxt) -> list[tuple[object, str, object]]:
    """(owner, attribute, lxt's replacement) for every method the family's AttnLRP rules replace."""
    module = importlib.import_module(family.module)
    norm = lxt.gemma3_norm if family.name == "gemma3" else lxt.patches.rms_norm_forward
    attention = module.eager_attention_forward
    if getattr(attention, "__lrp_dispatcher__", False):  # already installed: wrap the original, not the stand-in
        attention = _originals[(module, "eager_attention_forward")][0]
    return [(getattr(module, family.mlp), "forward", lxt.patches.gated_mlp_forward),
            (getattr(module, family.norm), family.norm_method, norm),
            (module, "eager_attention_forward", lxt.patches.wrap_attention_forward(attention))]


def _install(targets) -> None:
    for owner, attribute, lrp in targets:
        if (owner, attribute) in _originals:
            continue
        owned = attribute in vars(owner)
        original = getattr(owner, attribute)
        _originals[(owner, attribute)] = (original, owned)
        setattr(owner, attribute, _dispatcher(original, lrp))


def _restore() -> None:
    """Put every original back exactly as it was (an inherited method: the override is deleted)."""
    for (owner, attribute), (original, owned) in list(_originals.items()):
        if owned:
            setattr(owner, attribute, original)
        else:
            delattr(owner, attribute)
        del _originals[(owner, attribute)]


@contextmanager
def lrp_rules(model) -> Iterator[Family]:
    """Inside the block, forwards of `model`'s family run in the calling thread with AttnLRP's rules (lxt 2.1), so
    that gradient x input of the word embeddings is the AttnLRP relevance; other threads, and this thread after the
    block, run the unmodified model. Yields the family.

    Raises NotApplicableError (naming the supported families) when the rules do not cover `model`."""
    global _users
    ok, why = check_supported(model)
    if not ok:
        raise NotApplicableError(f"AttnLRP cannot explain this model: {why}")
    family = family_of(model)
    lxt = lxt_rules()
    with _lock:
        try:
            _install(_targets(family, lxt))
        except Exception:  # e.g. a transformers version without one of the patched names: leave nothing behind
            if _users == 0:
                _restore()
            raise
        _users += 1
    _active.depth = getattr(_active, "depth", 0) + 1
    try:
        yield family
    finally:
        _active.depth -= 1
        with _lock:
            _users -= 1
            if _users == 0:
                _restore()


def rules_installed() -> bool:
    """Whether any dispatcher is in place now (False whenever no thread is inside `lrp_rules`)."""
    return bool(_originals)

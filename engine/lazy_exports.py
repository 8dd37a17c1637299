"""Package faces whose names load on first use (PEP 562), written once.

A package's `__init__.py` lists each public name and the module that defines it, and assigns what `lazy_face`
returns to its module-level `__getattr__` and `__dir__`:

    _EXPORTS = {"Batch": "batch", "bootstrap_ci": "engine.stats"}
    __all__ = sorted(_EXPORTS)
    __getattr__, __dir__ = lazy_face(__name__, _EXPORTS)

Importing the package, or one of its light submodules, then imports nothing heavy (torch, transformers) through the
face until a name that needs it is read. Standard library only, at the bottom of the layers, so every face may use it.
"""
from __future__ import annotations

import importlib
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing, as in engine/__init__.py (imported by it)
if TYPE_CHECKING:
    from collections.abc import Callable


def lazy_face(package: str, exports: dict[str, str], *, cache: bool = True,
              renamed: dict[str, str] | None = None) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of a package face whose public names load from their modules on first use.

    Args:
        package: the package's module name (`__name__` in its `__init__.py`).
        exports: public name -> the module that defines it: a bare name is a submodule of `package` ("batch" in
            `engine.models` is `engine.models.batch`), a dotted one a full module name ("engine.stats").
        cache: keep a loaded value in the package's namespace, so later look-ups skip `__getattr__`; False reads it
            from its module each time (then a module replaced in `sys.modules`, a test's stand-in, is honoured).
        renamed: public name -> the name it has in its module, for a name exported under another one.

    Returns:
        (`__getattr__`, `__dir__`), to assign at module level. `__getattr__` raises AttributeError, worded as
        Python's own, for a name not in `exports`; `__dir__` lists the package's namespace and every export.
    """
    modules = {name: module if "." in module else f"{package}.{module}" for name, module in exports.items()}
    renamed = dict(renamed or {})

    def __getattr__(name: str) -> object:
        if name in modules:
            value = getattr(importlib.import_module(modules[name]), renamed.get(name, name))
            if cache:
                vars(sys.modules[package])[name] = value  # later look-ups skip this function
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(modules))

    return __getattr__, __dir__

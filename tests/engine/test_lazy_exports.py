"""engine.lazy_exports.lazy_face: a package face's names load on first use (PEP 562), and the faces built on it
(`engine.models`, `engine.ood`) import no torch until a name that needs it is read."""
from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from engine.lazy_exports import lazy_face

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def face(monkeypatch):
    """A package `lazyface_pkg` with a submodule `lazyface_pkg.sub` defining `value` and `other`, all in sys.modules."""
    package = types.ModuleType("lazyface_pkg")
    sub = types.ModuleType("lazyface_pkg.sub")
    sub.value, sub.other = object(), object()
    monkeypatch.setitem(sys.modules, "lazyface_pkg", package)
    monkeypatch.setitem(sys.modules, "lazyface_pkg.sub", sub)
    return package, sub


def test_a_bare_module_name_is_a_submodule_and_a_cached_value_skips_the_look_up(face):
    package, sub = face
    package.__getattr__, package.__dir__ = lazy_face("lazyface_pkg", {"value": "sub"})
    assert package.value is sub.value
    assert vars(package)["value"] is sub.value  # cached: Python no longer calls __getattr__ for it
    assert "value" in dir(package)


def test_without_cache_each_read_asks_the_module_and_a_renamed_name_reads_its_own(face):
    package, sub = face
    package.__getattr__, package.__dir__ = lazy_face("lazyface_pkg", {"value": "lazyface_pkg.sub", "alias": "sub"},
                                                     cache=False, renamed={"alias": "other"})
    assert package.value is sub.value and "value" not in vars(package)
    assert package.alias is sub.other
    sub.value = replaced = object()  # a stand-in put in place later is what the next read returns
    assert package.value is replaced
    assert sorted(n for n in dir(package) if not n.startswith("_")) == ["alias", "value"]


def test_an_unknown_name_raises_attribute_error_worded_as_pythons(face):
    package, _ = face
    package.__getattr__, package.__dir__ = lazy_face("lazyface_pkg", {"value": "sub"})
    with pytest.raises(AttributeError, match="module 'lazyface_pkg' has no attribute 'missing'"):
        package.missing  # noqa: B018
    assert not hasattr(package, "missing")


def test_importing_the_model_and_ood_faces_imports_no_torch():
    code = ("import sys, engine.models, engine.ood, engine.faithfulness\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"

"""`engine` exports what a notebook user needs (engine.__all__), each name resolves to the object its module
defines, `import engine` alone imports no torch, and every exported function documents its Args and Returns."""
from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import engine

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_NEEDS = ("load_classifier", "explain_text", "recursive_masking", "erasure_metrics", "get_dataset",
                  "ResultsStore", "get_explainer", "CheckpointMeta", "EngineError")


def test_the_surface_names_what_a_notebook_needs_and_every_name_resolves():
    """Every name in engine.__all__ resolves, to the same object as in its defining module."""
    from engine.faithfulness.erasure import erasure_metrics
    from engine.models.checkpoint import load_classifier
    from engine.results.store import ResultsStore

    for name in NOTEBOOK_NEEDS:
        assert name in engine.__all__, name
    for name in engine.__all__:
        assert getattr(engine, name) is not None, name
    assert engine.load_classifier is load_classifier
    assert engine.erasure_metrics is erasure_metrics
    assert engine.ResultsStore is ResultsStore
    assert "recursive_masking" in dir(engine)


def test_import_engine_alone_stays_light():
    """`import engine` loads no torch, transformers or pandas: the names load on first use."""
    code = "import sys, engine; print(sorted(m for m in ('torch', 'transformers', 'pandas') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_exported_function_documents_its_args_and_returns():
    """The docstring of each exported function has an Args section (when it takes arguments) and a Returns one."""
    missing = []
    for name in engine.__all__:
        obj = getattr(engine, name)
        if not inspect.isfunction(obj):
            continue
        doc = inspect.getdoc(obj) or ""
        takes = bool(inspect.signature(obj).parameters)
        if "Returns:" not in doc or (takes and "Args:" not in doc):
            missing.append(name)
    assert not missing, missing

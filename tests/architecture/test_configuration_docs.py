"""docs/configuration.md says when each setting is read (each use, model load, process), and what it says holds:
a setting read at model load (ENGINE_PREFIX_CACHE) is kept by a model already loaded, one read at each use (the
folders) follows the environment between calls."""
from __future__ import annotations

import re
from pathlib import Path

from engine import settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
WHEN = ("each use", "model load", "process")


def _read_column() -> dict[str, str]:
    """variable -> its "read" cell in the table of docs/configuration.md."""
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if m := re.match(r"\| `(ENGINE_[A-Z_]+)` \| [^|]+ \| ([^|]+) \|", line):
            rows[m.group(1)] = m.group(2).strip()
    return rows


def test_every_setting_says_when_it_is_read():
    """Each variable engine/settings.py reads has a row whose "read" cell is one of the three documented times."""
    rows = _read_column()
    assert set(settings.SETTINGS) <= set(rows), set(settings.SETTINGS) - set(rows)
    assert {name: rows[name] for name in settings.SETTINGS if rows[name] not in WHEN} == {}


def test_the_prefix_cache_is_fixed_when_a_prompted_lm_is_loaded(monkeypatch):
    """ENGINE_PREFIX_CACHE is documented as read at model load, and is: a prompted LM built under 0 keeps its prefix
    cache off after the variable says 1, and one built after that has it on (the doc said every setting could
    change between calls)."""
    from test_target_names import _prompted

    assert _read_column()["ENGINE_PREFIX_CACHE"] == "model load"
    monkeypatch.setenv("ENGINE_PREFIX_CACHE", "0")
    loaded = _prompted()
    monkeypatch.setenv("ENGINE_PREFIX_CACHE", "1")
    assert loaded.prefix_cache is False
    assert _prompted().prefix_cache is True


def test_the_folders_follow_the_environment_between_calls(monkeypatch, tmp_path):
    """The folder settings documented as read at each use give the new value at the next call."""
    rows = _read_column()
    for name, read in (("ENGINE_MODELS_CACHE", settings.models_cache_dir), ("ENGINE_RESULTS_DIR", settings.results_dir),
                       ("ENGINE_USER_DIR", settings.user_dir), ("ENGINE_ANNOTATIONS_DB", settings.annotations_db_path),
                       ("ENGINE_GENERATIONS_DB", settings.generations_db_path)):
        assert rows[name] == "each use"
        for value in ("a", "b"):
            monkeypatch.setenv(name, str(tmp_path / value))
            assert read() == tmp_path / value, name

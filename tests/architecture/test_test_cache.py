"""The per-machine test cache's keys (tests/conftest.py): what a cached thing is keyed by decides when a developer
pays for it again, and a key that misses a dependency would hand out a stale build."""
from __future__ import annotations

import conftest


def test_a_narrowed_key_follows_its_own_modules_and_the_requirements_only(tmp_path, monkeypatch):
    """The converted LLMs are keyed by the conversion code (LLM_CONVERSION_CODE), not all of engine/: an edit
    elsewhere in the engine keeps them, an edit to the conversion or the requirements rebuilds them, and the default
    key (everything else the tests cache) follows every engine file."""
    (tmp_path / "engine" / "models").mkdir(parents=True)
    conversion, other, requirements = (tmp_path / "engine/models/llm_package.py", tmp_path / "engine/explain.py",
                                       tmp_path / "requirements.txt")
    for path in (conversion, other, requirements):
        path.write_text("v1")
    monkeypatch.setattr(conftest, "ROOT", tmp_path)
    narrow = ("engine/models/llm_package.py",)
    before = conftest._code_hash(narrow), conftest._code_hash()
    other.write_text("v2")
    after_other = conftest._code_hash(narrow), conftest._code_hash()
    assert after_other[0] == before[0] and after_other[1] != before[1]
    conversion.write_text("v2")
    assert conftest._code_hash(narrow) != after_other[0]
    changed = conftest._code_hash(narrow)
    requirements.write_text("v3")
    assert conftest._code_hash(narrow) != changed, "a requirements change rebuilds a narrowed entry too"


def test_the_conversion_modules_exist():
    """A renamed module would silently drop out of the key (missing files are skipped): each must be there."""
    for name in conftest.LLM_CONVERSION_CODE:
        assert (conftest.ROOT / name).is_file(), name

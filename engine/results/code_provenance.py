"""Which code made each shipped result: every `*code_version` field of the JSON files under a results root, and
whether a commit holds that code (`engine.runtime.code_version`: "-dirty" means uncommitted code changes).

`python -m engine docs-tables --check` refuses a shipped result whose code no commit holds. Results recorded before
"dirty" was decided over the code alone (a bare "-dirty", no diff hash: results/ and docs changes counted too) were
audited against git history by `scripts/archive/relabel_dirty_provenance.py`: relabelled to the commit where the history
shows the code was as committed, else kept and labelled with a note beside the field (`<field>_note`). A bare
"-dirty" with such a note is accepted as that label says; a new-style one (with the diff's hash) never is.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.runtime import DIRTY_MARK

NOTE_SUFFIX = "_note"  # `<field>_note` beside a relabelled or labelled `<field>` (e.g. code_version_note)
RECORDED_SUFFIX = "_recorded"  # `<field>_recorded`: what the run recorded, beside a relabelled field
SKIPPED = ("published",)  # numbers copied from papers: no code of ours made them


@dataclass(frozen=True)
class CodeVersionField:
    """One `*code_version` field of a shipped file: the file, the path of keys to its dict, the key, the value, and
    the note beside it (None when there is none)."""

    file: Path
    where: tuple[str, ...]
    key: str
    version: str
    note: str | None

    @property
    def dirty(self) -> bool:
        return DIRTY_MARK in self.version

    @property
    def legacy_dirty(self) -> bool:
        """Recorded by the rule that counted any change (a bare "-dirty", no hash of a code diff)."""
        return self.version.endswith(DIRTY_MARK)


def code_version_fields(obj, where: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict, str]]:
    """(path of keys, the dict, key) of every string field whose key ends in `code_version`, depth first."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(value, str) and key.endswith("code_version"):
                yield where, obj, key
            else:
                yield from code_version_fields(value, (*where, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from code_version_fields(value, (*where, str(i)))


def shipped_json_files(root: Path) -> list[Path]:
    """Every JSON file under a results root but the published numbers, sorted."""
    return sorted(p for p in Path(root).rglob("*.json") if p.relative_to(root).parts[0] not in SKIPPED)


def shipped_code_versions(root: str | Path) -> list[CodeVersionField]:
    """Every code version field of the shipped results under `root`."""
    root = Path(root)
    found = []
    for path in shipped_json_files(root):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue  # not ours to judge here: the stores that read it refuse it
        for where, holder, key in code_version_fields(data):
            note = holder.get(key + NOTE_SUFFIX)
            found.append(CodeVersionField(path, where, key, holder[key], note if isinstance(note, str) else None))
    return found


def code_provenance_problems(root: str | Path) -> list[str]:
    """One line per shipped result field whose code no commit holds and that no audit labelled: a new-style dirty
    version (always), or a bare "-dirty" without its note."""
    root = Path(root)
    problems = []
    for field in shipped_code_versions(root):
        if not field.dirty or (field.legacy_dirty and field.note):
            continue
        where = ".".join((*field.where, field.key))
        why = ("no commit holds its code: rerun it from committed code" if not field.legacy_dirty else
               "recorded as -dirty and never audited: run scripts/archive/relabel_dirty_provenance.py or rerun it")
        problems.append(f"{field.file.relative_to(root.parent) if root.parent in field.file.parents else field.file}: "
                        f"{where} = {field.version}: {why}")
    return problems

"""The repository stands alone: nothing points at files outside it (the design notes a clone does not have), and every
citation of docs/methods.md names a section that exists there."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Spelled in pieces so that this file does not match itself.
OUTSIDE = ("../" + "shared", "REFERENCE" + " section", "SMAT" + ".md", "OFFLINE" + ".md")


def _tracked_text_files() -> list[Path]:
    """Every file git tracks or would add (untracked but not ignored), outside .git; binary files skipped."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    files = []
    for name in out:
        path = ROOT / name
        if path.is_file() and b"\0" not in path.read_bytes()[:4096]:
            files.append(path)
    return files


def test_no_file_refers_to_files_outside_the_repository():
    hits = []
    for path in _tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        hits += [f"{path.relative_to(ROOT)}: {needle}" for needle in OUTSIDE if needle in text]
    assert hits == []


def _slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_methods_citation_names_an_existing_section():
    methods = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    anchors = {_slug(line.lstrip("#")) for line in methods.splitlines() if line.startswith("## ")}
    cited = set()
    for path in _tracked_text_files():
        cited |= set(re.findall(r"methods\.md#([a-z0-9-]+)", path.read_text(encoding="utf-8", errors="replace")))
    assert cited, "nothing cites docs/methods.md"
    assert cited <= anchors, sorted(cited - anchors)


# "issue 35" means something only to the project's internal tracker, which a clone does not have: code and docs say
# what the change was instead. Results (provenance records) are left alone: they quote commands verbatim.
TRACKER = re.compile(r"\bissue\s+#?\d+", re.IGNORECASE)


def test_no_code_or_doc_refers_to_the_internal_tracker():
    hits = []
    for path in _tracked_text_files():
        relative = path.relative_to(ROOT)
        if relative.parts[0] == "results" or relative == Path(__file__).relative_to(ROOT):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if TRACKER.search(line):
                hits.append(f"{relative}:{number}: {line.strip()[:100]}")
    assert hits == []

"""The README is a landing page: under 170 lines, with the two set-up commands, and every
document it links to exists (the details moved to docs/ stay reachable)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_is_a_landing_page_whose_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 170
    assert "\n    bash scripts/start.sh\n" in text and "\n    bash scripts/test.sh\n" in text
    links = set(re.findall(r"\]\(((?:docs/)[^)#\s]+)", text))
    assert {"docs/commands.md", "docs/dashboard.md"} <= links
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, missing


def test_the_moved_details_link_back_to_files_that_exist():
    for page in ("commands.md", "dashboard.md"):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        links = {link for link in re.findall(r"\]\(([^)#\s]+)", text) if "://" not in link}
        missing = [link for link in links if not (ROOT / "docs" / link).is_file()]
        assert not missing, (page, missing)

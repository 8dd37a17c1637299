"""Audit the shipped results that record a "-dirty" code version from before "dirty" was decided over the code alone,
against git history, and relabel or label each (docs/reproduction.md).

Until then a run's code version said "-dirty" whenever any tracked file differed from the commit, results/ and docs
included (and runs write tracked files under results/ themselves). For each such `*code_version` field, with C the
commit it names and X the commit that shipped the file as it is now (the last commit of HEAD's history that changed
it), the code (engine/, scripts/, bench/, app/, pages/, pyproject.toml, requirements*.txt) is shown as committed when

  (a) X holds the same code as C: the commit that shipped the result has exactly the code the run named, or
  (b) C has a next commit in HEAD's history and none of its next commits changes the code: whatever was uncommitted
      when the run started was not code that was committed next.

Then the field is relabelled to C (`0.1.0+C`), the recorded value kept as `<field>_recorded` and the evidence as
`<field>_note`. Otherwise the field keeps its "-dirty" value and gets a `<field>_note` saying the code cannot be
shown committed and why. git history alone is evidence, not proof: an uncommitted code change that was later thrown
away leaves no trace in it; the notes say which evidence each label rests on.

A version with a diff hash (`0.1.0+C-dirty.D`, written since "dirty" is decided over the code) is relabelled only on
proof: when a later commit X of HEAD's history has exactly that code diff from C (D is the hash of `git diff C X`
over the code, as `code_diff_sha256` takes it), the run ran X's code with C checked out (a copy of the tree whose
git metadata was older, as on a lent GPU machine); otherwise it is left as it is, and `report --check` refuses it.

Deterministic for a given HEAD (files in sorted order, HEAD's history only) and idempotent (a field with a note is
left as it is). `--dry-run` lists what it would do.

    python scripts/relabel_dirty_provenance.py --dry-run
    python scripts/relabel_dirty_provenance.py
    python scripts/relabel_dirty_provenance.py --smoke     # CI: a dry run
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import subprocess
from pathlib import Path

from engine.results.code_provenance import NOTE_SUFFIX, RECORDED_SUFFIX, code_version_fields, shipped_json_files
from engine.runtime import CODE_PATHS, DIRTY_MARK, PROJECT_ROOT


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def git_bytes(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, check=True).stdout


class History:
    """Look-ups in HEAD's history, each made once."""

    def __init__(self):
        self.children: dict[str, list[str]] = collections.defaultdict(list)
        for line in git("rev-list", "--children", "HEAD").splitlines():
            commit, *kids = line.split()
            self.children[commit] = kids
        self._changed: dict[tuple[str, str], list[str]] = {}

    def full(self, short: str) -> str | None:
        try:
            return git("rev-parse", "--verify", "--quiet", short + "^{commit}")
        except subprocess.CalledProcessError:
            return None

    def code_changes(self, a: str, b: str) -> list[str]:
        """Code files that differ between commits a and b."""
        if (a, b) not in self._changed:
            self._changed[(a, b)] = git("diff", "--name-only", a, b, "--", *CODE_PATHS).splitlines()
        return self._changed[(a, b)]

    def shipped_by(self, path: Path) -> str | None:
        """The last commit of HEAD's history that changed `path` (None when it was never committed)."""
        return git("log", "-1", "--format=%H", "HEAD", "--", str(path.relative_to(PROJECT_ROOT))) or None


def verdict(history: History, version: str, path: Path) -> tuple[str | None, str]:
    """(clean version or None, note) for a legacy dirty `version` recorded in `path`."""
    prefix, commit = version.removesuffix(DIRTY_MARK).split("+", 1)
    full = history.full(commit)
    shipped = history.shipped_by(path)
    recorded = f"recorded {version} when any tracked change (results/, docs/ included) counted as dirty"
    if full is None or shipped is None:
        return None, f"{recorded}; {'commit ' + commit + ' is not in the history' if full is None else 'file never committed'}: the code cannot be shown committed"
    shipped_diff = history.code_changes(full, shipped)
    if not shipped_diff:
        return f"{prefix}+{commit}", f"relabelled from {recorded}: the commit that shipped this file ({shipped[:12]}) holds the same code as {commit}"
    kids = history.children.get(full, [])
    kids_diff = {k: history.code_changes(full, k) for k in kids}
    if kids and not any(kids_diff.values()):
        return f"{prefix}+{commit}", (f"relabelled from {recorded}: the next commit(s) after {commit} "
                                      f"({', '.join(k[:12] for k in kids)}) change no code")
    changed = sorted({f for files in kids_diff.values() for f in files} | set(shipped_diff))
    listed = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
    return None, (f"{recorded}; code unknown: the commit that shipped this file ({shipped[:12]}) and the next commit(s) "
                  f"after {commit} change code ({listed}), so git cannot show the run's code was {commit}'s")


def diff_verdict(history: History, version: str) -> tuple[str | None, str]:
    """(clean version or None, note) for `prefix+C-dirty.D`: the later commit whose code diff from C hashes to D."""
    prefix, rest = version.split("+", 1)
    commit, diff = rest.split(DIRTY_MARK + ".", 1)
    full = history.full(commit)
    if full is None:
        return None, f"commit {commit} is not in the history"
    for later in git("rev-list", "--reverse", f"{full}..HEAD").splitlines():
        patch = git_bytes("diff", full, later, "--binary", "--", *CODE_PATHS)
        if hashlib.sha256(patch).hexdigest()[:12] == diff:
            short = git("rev-parse", "--short=12", later)
            return f"{prefix}+{short}", (f"relabelled from {version}: its uncommitted code diff {diff} is, byte for byte, "
                                         f"git diff {commit} {short} over the code: the run ran {short}'s code on a "
                                         f"copy whose git metadata said {commit}")
    return None, f"no commit after {commit} in HEAD's history has the code diff {diff}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results-dir", default=str(PROJECT_ROOT / "results"), help="results root (default: results/)")
    ap.add_argument("--dry-run", action="store_true", help="list the verdicts, write nothing")
    ap.add_argument("--smoke", action="store_true", help="CI smoke mode: --dry-run over the shipped results (writes nothing)")
    args = ap.parse_args()
    args.dry_run = args.dry_run or args.smoke
    history = History()
    tally: collections.Counter = collections.Counter()
    runs: dict[str, set[str]] = collections.defaultdict(set)
    root = Path(args.results_dir).resolve()
    for path in shipped_json_files(root):
        text = path.read_text(encoding="utf-8")
        if DIRTY_MARK not in text:
            continue
        data = json.loads(text)
        changed = False
        for _, holder, key in list(code_version_fields(data)):
            version = holder[key]
            if isinstance(holder.get(key + NOTE_SUFFIX), str) or DIRTY_MARK not in version:
                continue
            if version.endswith(DIRTY_MARK):
                clean, note = verdict(history, version, path)
            else:  # a diff hash: relabelled on proof only, never labelled (report --check keeps refusing it)
                clean, note = diff_verdict(history, version)
                if clean is None:
                    tally[(key, "left dirty")] += 1
                    if args.dry_run:
                        print(f"{path.relative_to(root)}: {key}: left as it is: {note}")
                    continue
            if clean is not None:
                holder[key] = clean
                holder[key + RECORDED_SUFFIX] = version
            holder[key + NOTE_SUFFIX] = note
            outcome = "relabelled" if clean else "labelled unknown"
            tally[(key, outcome)] += 1
            runs[outcome].add("/".join(path.relative_to(root).parts[:2]))
            changed = True
            if args.dry_run:
                print(f"{path.relative_to(root)}: {key}: {note}")
        if changed and not args.dry_run:
            path.write_text(json.dumps(data, indent=2) + ("\n" if text.endswith("\n") else ""), encoding="utf-8")
    for (key, outcome), n in sorted(tally.items()):
        print(f"{outcome}: {n} {key} fields")
    for outcome, names in sorted(runs.items()):
        print(f"{outcome}: {', '.join(sorted(names))}")
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    raise SystemExit(main())

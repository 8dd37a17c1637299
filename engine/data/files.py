"""Reading a user's data file in chunks: CSV, TSV, JSON Lines, Parquet, and a folder written by the
`datasets` library's `save_to_disk` (read here with pyarrow directly, so `datasets` need not be installed).

Everything here streams: `read_chunks` yields a few tens of thousands of rows at a time, holding only the
columns asked for, so a file far larger than memory can be validated. Rows are numbered from 1 at the first
data row (the CSV header is not a row; blank lines are skipped and not counted); JSON Lines rows are
numbered by their line in the file. Every problem raises `DataFileError` naming the file and, where it can
be found, the row or line.

A `save_to_disk` folder is either one split (`state.json` listing its `data-*.arrow` files, Arrow IPC
streams, next to `dataset_info.json`) or a `DatasetDict` (`dataset_dict.json` naming split sub-folders, each
laid out like the former). A data file named there must lie inside the folder: a name that leads outside
(`../x.arrow`, an absolute path, a link to elsewhere) is refused.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import DataFileError

#: file name suffix -> format; a folder is the `arrow` format (`save_to_disk`)
SUFFIX_FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",  # accepted when it holds one object per line (what `DataFrame.to_json(lines=True)` writes)
    ".parquet": "parquet",
    ".pq": "parquet",
}
FORMATS = ("csv", "tsv", "jsonl", "parquet", "arrow")
DEFAULT_CHUNK_ROWS = 50_000
# pyarrow's streaming CSV reader parses this many bytes at a time and reads up to 32 blocks ahead, so its
# memory is bounded by about 32 blocks whatever the file's size (bench/data_registration.py).
_CSV_BLOCK_BYTES = 1 << 20
_HASH_BLOCK_BYTES = 1 << 20


@dataclass
class Chunk:
    """Consecutive rows of the file.

    columns: column name -> pyarrow Array of the rows (types as stored: strings for CSV/TSV, as written
        for the others; JSON lists come as lists).
    rows: [N] int64 row numbers (1-based; JSON Lines: line numbers).
    split: [N] split name of each row in a `DatasetDict` folder (its sub-folder), else None.
    done, total: bytes read so far and in all, for a progress bar.
    """

    columns: dict
    rows: np.ndarray
    split: list[str] | None
    done: int
    total: int

    def __len__(self) -> int:
        return len(self.rows)


def detect_format(path: Path) -> str:
    """The format of `path` from its suffix, or `arrow` for a `save_to_disk` folder."""
    path = Path(path)
    if not path.exists():
        raise DataFileError(f"{path}: no such file or folder")
    if path.is_dir():
        if (path / "state.json").is_file() or (path / "dataset_dict.json").is_file():
            return "arrow"
        raise DataFileError(f"{path} is a folder but not one written by `datasets`' save_to_disk "
                            "(it has neither state.json nor dataset_dict.json)")
    fmt = SUFFIX_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataFileError(f"{path}: unknown file type {path.suffix!r}; use one of "
                            f"{', '.join(sorted(SUFFIX_FORMATS))} or a folder saved with save_to_disk")
    return fmt


# -- save_to_disk folders ---------------------------------------------------------------------------

def _inside(root: Path, relative: str, what: str) -> Path:
    """`root / relative`, refused when it leads outside `root` (after resolving links)."""
    if not isinstance(relative, str) or not relative or "\x00" in relative:
        raise DataFileError(f"{root}: {what} names an invalid path {relative!r}")
    target = (root / relative).resolve()
    if not target.is_relative_to(root.resolve()):
        raise DataFileError(f"{root}: {what} points outside the folder ({relative!r} -> {target}); refusing to read it")
    return target


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataFileError(f"{path} cannot be read as JSON: {err}") from None
    if not isinstance(value, dict):
        raise DataFileError(f"{path} should hold a JSON object")
    return value


def arrow_folder_parts(root: Path) -> list[tuple[str | None, list[Path]]]:
    """(split name or None, its Arrow files in order) for a `save_to_disk` folder."""
    root = Path(root)
    if (root / "dataset_dict.json").is_file():
        splits = _read_json(root / "dataset_dict.json").get("splits")
        if not isinstance(splits, list) or not splits:
            raise DataFileError(f"{root / 'dataset_dict.json'} does not list any split")
        return [(str(split), _state_files(_inside(root, str(split), "dataset_dict.json"), root)) for split in splits]
    return [(None, _state_files(root, root))]


def _state_files(folder: Path, root: Path) -> list[Path]:
    state_path = folder / "state.json"
    if not state_path.is_file():
        raise DataFileError(f"{folder} lacks state.json: not a split written by save_to_disk")
    entries = _read_json(state_path).get("_data_files")
    if not isinstance(entries, list) or not entries:
        raise DataFileError(f"{state_path} lists no data files (_data_files)")
    files = []
    for entry in entries:
        name = entry.get("filename") if isinstance(entry, dict) else None
        path = _inside(folder, name, f"{state_path.name} of {folder.name}")
        if not path.is_relative_to(root.resolve()):
            raise DataFileError(f"{root}: {name!r} points outside the folder; refusing to read it")
        if not path.is_file():
            raise DataFileError(f"{path} is listed in {state_path} but missing")
        files.append(path)
    return files


def class_label_names(root: Path, column: str) -> list[str] | None:
    """The names of a `ClassLabel` column of a `save_to_disk` folder (its ints index them), else None."""
    for _split, files in arrow_folder_parts(root):
        info_path = files[0].parent / "dataset_info.json"
        if info_path.is_file():
            feature = (_read_json(info_path).get("features") or {}).get(column)
            if isinstance(feature, dict) and feature.get("_type") == "ClassLabel" and isinstance(feature.get("names"), list):
                return [str(n) for n in feature["names"]]
    return None


def _open_arrow(path: Path):
    import pyarrow as pa

    try:
        source = pa.memory_map(str(path))
        try:
            return pa.ipc.open_stream(source)  # what save_to_disk writes
        except pa.ArrowInvalid:
            return pa.ipc.open_file(source)  # the IPC file format, for folders written by other tools
    except (pa.ArrowInvalid, OSError) as err:
        raise DataFileError(f"{path} is not a readable Arrow file (truncated or damaged?): {err}") from None


def _source_files(path: Path, fmt: str) -> list[Path]:
    if fmt != "arrow":
        return [path]
    files = [f for _split, fs in arrow_folder_parts(path) for f in fs]
    for meta in ("dataset_dict.json", "state.json", "dataset_info.json"):
        files += sorted(p for p in path.rglob(meta) if p.resolve().is_relative_to(path.resolve()))
    return sorted(set(files))


# -- columns and preview ----------------------------------------------------------------------------

def _csv_header(path: Path, delimiter: str) -> list[str]:
    try:
        with open(path, "rb") as f:
            first = f.readline()  # the header alone: a bad byte further down is the row scan's to name
        line = first.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataFileError(f"{path}: the header is not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise DataFileError(f"{path} cannot be read: {err}") from None
    try:
        header = next(csv.reader([line], delimiter=delimiter), None)
    except csv.Error as err:
        raise DataFileError(f"{path}: the header cannot be parsed: {err}") from None
    if not header:
        raise DataFileError(f"{path} is empty: expected a header line naming the columns")
    return header


def _jsonl_lines(path: Path) -> Iterator[tuple[int, dict, int]]:
    """(line number, object, bytes read so far) of each non-blank line."""
    try:
        f = open(path, "rb")
    except OSError as err:
        raise DataFileError(f"{path} cannot be read: {err}") from None
    with f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except UnicodeDecodeError as err:
                raise DataFileError(f"{path}: line {number} is not UTF-8 text ({err.reason})") from None
            except json.JSONDecodeError as err:
                hint = " (the file may be truncated)" if not raw.endswith(b"\n") else ""
                raise DataFileError(f"{path}: line {number} is not valid JSON: {err.msg} at column {err.colno}{hint}") from None
            if not isinstance(value, dict):
                raise DataFileError(f"{path}: line {number} holds a JSON {type(value).__name__}, expected an object "
                                    "such as {\"text\": ..., \"label\": ...} (one per line)")
            yield number, value, f.tell()


def list_columns(path: Path, fmt: str | None = None) -> list[str]:
    """The column names, read without loading the data (JSON Lines: the keys of the first 1,000 lines)."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt in ("csv", "tsv"):
        return _csv_header(path, "," if fmt == "csv" else "\t")
    if fmt == "jsonl":
        names: dict[str, None] = {}
        for i, (_number, obj, _done) in enumerate(_jsonl_lines(path)):
            names.update(dict.fromkeys(obj))
            if i >= 999:
                break
        if not names:
            raise DataFileError(f"{path} holds no JSON object")
        return list(names)
    if fmt == "parquet":
        return list(_parquet(path).schema_arrow.names)
    if fmt == "arrow":
        return list(_open_arrow(arrow_folder_parts(path)[0][1][0]).schema.names)
    raise DataFileError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def _parquet(path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # buffered page reads: a large row group is not read into memory whole
        return pq.ParquetFile(str(path), buffer_size=1 << 20, pre_buffer=False)
    except (pa.ArrowInvalid, OSError) as err:
        raise DataFileError(f"{path} is not a readable Parquet file (truncated or damaged?): {err}") from None


def preview(path: Path, rows: int = 20, fmt: str | None = None):
    """The first `rows` rows as a pandas DataFrame (all columns), for a page or a terminal."""
    import pandas as pd

    path = Path(path)
    fmt = fmt or detect_format(path)
    columns = list_columns(path, fmt)
    for chunk in read_chunks(path, columns, fmt=fmt, chunk_rows=rows):
        frame = pd.DataFrame({name: chunk.columns[name].to_pylist() for name in columns})
        frame.index = chunk.rows
        if chunk.split is not None:
            frame.insert(0, "(split folder)", chunk.split)
        return frame.head(rows)
    return pd.DataFrame(columns=columns)


# -- chunks ---------------------------------------------------------------------------------------

def read_chunks(path: Path, columns: Sequence[str], fmt: str | None = None,
                chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[Chunk]:
    """The rows of `columns` in chunks of at most `chunk_rows` (CSV: pyarrow's block size decides).
    The columns must exist (check with `list_columns` first); a row lacking one (JSON Lines) reads as null."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    readers = {"csv": _csv_chunks, "tsv": _csv_chunks, "jsonl": _jsonl_chunks, "parquet": _parquet_chunks, "arrow": _arrow_chunks}
    if fmt not in readers:
        raise DataFileError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    yield from readers[fmt](path, list(columns), fmt, chunk_rows)


def _csv_chunks(path: Path, columns: list[str], fmt: str, chunk_rows: int) -> Iterator[Chunk]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    delimiter = "," if fmt == "csv" else "\t"
    total = path.stat().st_size
    f = pa.OSFile(str(path), "rb")  # arrow's own file: no Python bytes objects per block
    with f:
        try:
            reader = pacsv.open_csv(
                f,
                read_options=pacsv.ReadOptions(block_size=_CSV_BLOCK_BYTES, use_threads=False),
                # texts may hold line breaks inside quotes
                parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
                # everything as text: labels '0'/'1' must not become numbers in one block and text in another
                convert_options=pacsv.ConvertOptions(include_columns=columns, column_types=dict.fromkeys(columns, pa.string()),
                                                     strings_can_be_null=False, quoted_strings_can_be_null=False),
            )
            start = 1
            for batch in reader:
                for offset in range(0, batch.num_rows, chunk_rows):
                    part = batch.slice(offset, chunk_rows)
                    yield Chunk({name: part.column(name) for name in columns}, np.arange(start, start + part.num_rows),
                                None, min(f.tell(), total), total)
                    start += part.num_rows
        except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
            raise DataFileError(f"{path}: {_locate_csv_problem(path, delimiter, str(err))}") from None


class _NotUtf8(Exception):
    def __init__(self, line: int, reason: str):
        super().__init__(line, reason)
        self.line, self.reason = line, reason


def _decoded_lines(raw) -> Iterator[str]:
    """The lines of a binary file decoded one at a time, so a bad byte is found on its own line."""
    for number, line in enumerate(raw, start=1):
        try:
            yield line.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as err:
            raise _NotUtf8(number, err.reason) from None


def _locate_csv_problem(path: Path, delimiter: str, arrow_message: str) -> str:
    """pyarrow's CSV errors do not say where: find the first bad row again with the csv module."""
    csv.field_size_limit(sys.maxsize)
    row = 0
    with open(path, "rb") as raw:
        reader = csv.reader(_decoded_lines(raw), delimiter=delimiter, strict=True)
        try:
            header = next(reader)
            for fields in reader:
                if not fields:
                    continue  # blank line: skipped, not counted
                row += 1
                if len(fields) != len(header):
                    last = next(reader, None) is None
                    return (f"row {row} (line {reader.line_num}) has {len(fields)} field(s) but the header has {len(header)}"
                            f"{' (it is the last row: the file may be truncated)' if last else ''}: "
                            f"{delimiter.join(fields)[:80]!r}")
        except _NotUtf8 as err:
            return f"row {row + 1} (line {err.line}) is not UTF-8 text ({err.reason}); save the file as UTF-8"
        except csv.Error as err:
            return f"row {row + 1} (line {reader.line_num}) cannot be parsed: {err} (the file may be truncated)"
    return f"cannot be parsed ({arrow_message})"


def _python_column(values: list):
    """A pyarrow Array from one JSON column; mixed scalar types (1 and "1") become text."""
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([None if v is None else json.dumps(v) if isinstance(v, (list, dict)) else str(v) for v in values],
                        type=pa.string())


def _jsonl_chunks(path: Path, columns: list[str], fmt: str, chunk_rows: int) -> Iterator[Chunk]:
    total = path.stat().st_size
    rows: list[int] = []
    values: dict[str, list] = {name: [] for name in columns}

    def flush(done: int) -> Chunk:
        chunk = Chunk({name: _python_column(v) for name, v in values.items()}, np.array(rows, dtype=np.int64),
                      None, min(done, total), total)
        rows.clear()
        for v in values.values():
            v.clear()
        return chunk

    done = 0
    for number, obj, done in _jsonl_lines(path):
        rows.append(number)
        for name in columns:
            values[name].append(obj.get(name))
        if len(rows) >= chunk_rows:
            yield flush(done)
    if rows:
        yield flush(total)


def _parquet_chunks(path: Path, columns: list[str], fmt: str, chunk_rows: int) -> Iterator[Chunk]:
    import pyarrow as pa

    parquet = _parquet(path)
    n = parquet.metadata.num_rows
    total = path.stat().st_size
    start = 1
    try:
        for batch in parquet.iter_batches(batch_size=chunk_rows, columns=columns):
            yield Chunk({name: batch.column(name) for name in columns}, np.arange(start, start + batch.num_rows), None,
                        int(total * (start - 1 + batch.num_rows) / max(n, 1)), total)
            start += batch.num_rows
    except (pa.ArrowInvalid, OSError) as err:
        raise DataFileError(f"{path}: rows from {start} on cannot be read (truncated or damaged?): {err}") from None


def _arrow_chunks(path: Path, columns: list[str], fmt: str, chunk_rows: int) -> Iterator[Chunk]:
    import pyarrow as pa

    parts = arrow_folder_parts(path)
    total = sum(f.stat().st_size for _split, files in parts for f in files)
    done, start = 0, 1
    for split, files in parts:
        for file in files:
            reader = _open_arrow(file)
            missing = [c for c in columns if c not in reader.schema.names]
            if missing:
                raise DataFileError(f"{file} lacks the column(s) {', '.join(map(repr, missing))}; it has {', '.join(reader.schema.names)}")
            try:
                for batch in reader:
                    for offset in range(0, batch.num_rows, chunk_rows):
                        part = batch.slice(offset, chunk_rows)
                        yield Chunk({name: part.column(name) for name in columns}, np.arange(start, start + part.num_rows),
                                    [split] * part.num_rows if split is not None else None, done, total)
                        start += part.num_rows
            except (pa.ArrowInvalid, OSError) as err:
                raise DataFileError(f"{file}: rows from {start} on cannot be read (truncated or damaged?): {err}") from None
            done += file.stat().st_size


# -- identity of a file -------------------------------------------------------------------------------

def fingerprint(path: Path, fmt: str | None = None, with_hash: bool = True) -> dict:
    """{'size': bytes, 'mtime_ns': latest modification, 'sha256': hex} of a file, or of a folder's data and
    metadata files (hashed with their relative names, in order)."""
    path = Path(path)
    files = _source_files(path, fmt or detect_format(path))
    stats = [f.stat() for f in files]
    out = {"size": sum(s.st_size for s in stats), "mtime_ns": max(s.st_mtime_ns for s in stats)}
    if with_hash:
        digest = hashlib.sha256()
        for f in files:
            if path.is_dir():
                digest.update(os.fsencode(f.resolve().relative_to(path.resolve())) + b"\x00")
            with open(f, "rb") as stream:
                while block := stream.read(_HASH_BLOCK_BYTES):
                    digest.update(block)
        out["sha256"] = digest.hexdigest()
    return out

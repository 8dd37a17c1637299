"""engine.atomic, and the writers built on it: a process SIGKILLed at any step of a write leaves the old
version or the new one complete, never a part (checkpoints, registered copies, the attention runner's
cells).

The kill tests fork a child that does the write; the child stops at its k-th file-system step (before or
after each rename, exchange or delete, or half-way through writing a file) and the parent kills it there
with SIGKILL, for k = 1, 2, ... until the write finishes without reaching step k. So every step of the
write is a kill point, deterministically, whatever the implementation's steps are."""
from __future__ import annotations

import io
import os
import shutil
import signal
import stat
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from engine import atomic

MAX_STEPS = 16


# -- the file and folder writers ---------------------------------------------------------------------------

def test_atomic_path_leaves_the_target_untouched_and_no_temporary_when_the_writer_fails(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError), atomic.atomic_path(target) as tmp:
        tmp.write_text("half", encoding="utf-8")
        raise RuntimeError("writer failed")
    assert target.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_atomic_write_replaces_whole_and_keeps_the_old_permissions(tmp_path):
    target = tmp_path / "x.txt"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o640)
    atomic.write_text(target, "new\r\nline")
    assert target.read_bytes() == b"new\r\nline"  # no newline translation
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    fresh = atomic.write_bytes(tmp_path / "sub" / "y.bin", b"\x00\x01")
    assert fresh.read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(fresh.stat().st_mode) & 0o600 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub", "x.txt"]


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2-exchange", "rename-aside"])
def test_replacing_folder_swaps_the_whole_folder_and_leaves_nothing_behind(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(atomic, "_RENAMEAT2", None)
    target = tmp_path / "model"
    target.mkdir()
    (target / "a").write_text("old a")
    (target / "b").write_text("old b")
    with atomic.replacing_folder(target) as tmp:
        assert (target / "a").read_text() == "old a"  # the old one stays in place while the new one is built
        (tmp / "a").write_text("new a")
    assert sorted(p.name for p in target.iterdir()) == ["a"]
    assert (target / "a").read_text() == "new a"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    with pytest.raises(RuntimeError), atomic.replacing_folder(target) as tmp:
        (tmp / "a").write_text("never")
        raise RuntimeError("writer failed")
    assert (target / "a").read_text() == "new a"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_recover_folder_puts_back_an_old_folder_left_aside_by_a_killed_swap(tmp_path):
    target = tmp_path / "model"
    aside = tmp_path / ".model.old"
    aside.mkdir()
    (aside / "a").write_text("old")
    atomic.recover_folder(target)
    assert (target / "a").read_text() == "old" and not aside.exists()
    aside.mkdir()  # a swap that finished but was killed before deleting the old copy
    atomic.recover_folder(target)
    assert (target / "a").read_text() == "old" and not aside.exists()


# -- kill at every step ------------------------------------------------------------------------------------

def _instrument(stop_at: int, marker: Path, half_writes: bool) -> None:
    """In the child: count file-system steps and, at step `stop_at`, write `marker` and wait to be killed."""
    count = [0]

    def step(what: str) -> None:
        count[0] += 1
        if count[0] == stop_at:
            marker.write_text(what, encoding="utf-8")
            time.sleep(120)

    def around(module, name):
        original = getattr(module, name)

        def wrapped(*args, **kwargs):
            step(f"before {name}{args[:2]}")
            result = original(*args, **kwargs)
            step(f"after {name}{args[:2]}")
            return result
        monkey.append((module, name, original))
        setattr(module, name, wrapped)

    monkey: list = []
    around(os, "replace")
    around(os, "rename")
    around(shutil, "rmtree")
    around(atomic, "_exchange")
    if half_writes:
        original = pd.DataFrame.to_parquet

        def slow_to_parquet(self, path, *args, **kwargs):
            """A slow writer: half the file is on disk when the kill comes."""
            buffer = io.BytesIO()
            original(self, buffer, *args, **kwargs)
            data = buffer.getvalue()
            with open(path, "wb") as f:
                f.write(data[: len(data) // 2])
                f.flush()
                step(f"half-way through writing {path}")
                f.write(data[len(data) // 2:])
        pd.DataFrame.to_parquet = slow_to_parquet


def _kill_at_every_step(tmp_path: Path, write, check, half_writes: bool = False) -> list:
    """Run `write()` in a forked child killed at step 1, 2, ...; after each kill call `check()` (which asserts
    the invariant and returns which version it found). Returns the versions found, one per kill."""
    found = []
    for k in range(1, MAX_STEPS + 1):
        marker = tmp_path / f"stopped-{k}"
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 0
            try:
                torch.set_num_threads(1)
                _instrument(k, marker, half_writes)
                write()
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        deadline = time.monotonic() + 60
        while not marker.exists():
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                assert os.waitstatus_to_exitcode(status) == 0, "the write failed in the child"
                assert k > 1, "the write reached no kill point"
                return found
            assert time.monotonic() < deadline, "the child neither stopped nor finished"
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        found.append((marker.read_text(encoding="utf-8"), check()))
    raise AssertionError(f"the write took more than {MAX_STEPS} steps")


def _untrained_tiny(tag: str):
    from engine.data import get_dataset
    from engine.models import TrainConfig
    from engine.models.training import untrained_classifier

    classifier = untrained_classifier(TrainConfig(base_model="tiny", dataset="toy"), get_dataset("toy"), torch.device("cpu"))
    classifier.metadata = {"classes": list(classifier.classes), "max_length": classifier.max_length, "tag": tag,
                           "base_model": "tiny", "dataset": "toy", "strategy": "plain"}
    return classifier


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2-exchange", "rename-aside"])
def test_a_checkpoint_overwrite_killed_at_any_step_leaves_the_old_or_the_new_checkpoint_loadable(
        tmp_path, models_cache, monkeypatch, exchange):
    """save_classifier(..., overwrite=True) killed at each step: load_classifier then gives the old or the new
    checkpoint, complete (it used to delete the old folder before the new one was in place)."""
    from engine.models import load_classifier, save_classifier

    if not exchange:
        monkeypatch.setattr(atomic, "_RENAMEAT2", None)
    old, new = _untrained_tiny("old"), _untrained_tiny("new")
    with torch.no_grad():
        next(new.model.parameters()).add_(1.0)
    save_classifier(old, "victim")

    def check():
        loaded = load_classifier("victim")
        tag = loaded.metadata["tag"]
        expected = old if tag == "old" else new
        assert torch.equal(next(loaded.model.parameters()), next(expected.model.parameters()))
        return tag

    found = _kill_at_every_step(tmp_path, lambda: save_classifier(new, "victim", overwrite=True), check)
    assert {tag for _, tag in found} == {"old", "new"}, found
    assert load_classifier("victim").metadata["tag"] == "new"
    # the killed writers' half-built folders were deleted by the next write
    assert sorted(p.name for p in models_cache.iterdir()) == ["victim"]


def test_a_registered_copy_overwrite_killed_at_any_step_leaves_the_old_or_the_new_copy_whole(tmp_path, models_cache):
    """models add --copy --overwrite killed at each step: the copy folder holds exactly the old model's files or
    exactly the new one's (it used to delete the old copy before the new one was in place)."""
    from engine.models import save_classifier
    from engine.models.registry import _COPIED_SUFFIXES, artifacts_dir, load_registered, register_model

    sources = {}
    for tag in ("old", "new"):
        classifier = _untrained_tiny(tag)
        if tag == "new":
            with torch.no_grad():
                next(classifier.model.parameters()).add_(1.0)
        sources[tag] = save_classifier(classifier, f"source-{tag}", cache_dir=tmp_path / "sources")
        (sources[tag] / "metadata.json").unlink()  # a folder fine-tuned elsewhere has none
    register_model(sources["old"], "reg", copy=True)
    copy = artifacts_dir("reg") / "model"

    def files(folder: Path) -> dict:
        return {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix in _COPIED_SUFFIXES}

    expected = {tag: files(folder) for tag, folder in sources.items()}

    def check():
        load_registered("reg")  # recovers a copy left aside, and must load
        got = files(copy)
        matches = [tag for tag, want in expected.items() if got == want]
        assert len(matches) == 1, sorted(got)
        return matches[0]

    found = _kill_at_every_step(tmp_path, lambda: register_model(sources["new"], "reg", copy=True, overwrite=True), check)
    assert {tag for _, tag in found} == {"old", "new"}, found
    assert files(copy) == expected["new"]


def test_an_attention_cell_killed_mid_write_is_never_seen_half_written(tmp_path):
    """The attention diagnostics are store cells now (they used to be three files written in place): a write of a
    cell killed at any step, half-way through its rows included, leaves either no cell (it is computed again) or
    the whole cell, and the store's reader never meets a truncated file."""
    from engine.attention.runner import AttentionCell, attention_store

    store = attention_store(tmp_path)
    key = AttentionCell(dataset="rt", part="base").key()
    rows = pd.DataFrame({"model": ["m"] * 2, "seed": [0, 0], "dataset": ["rt"] * 2, "measure": ["base"] * 2,
                         "strategy": ["plain"] * 2, "step": [0, 0], "ratio": [float("nan")] * 2,
                         "metric": ["accuracy", "f1_positive"], "value": [0.75, 0.76], "p_value": [float("nan")] * 2})

    def check():
        data = store.load("r") if (store.root / "r" / "cells").is_dir() else pd.DataFrame()
        if store.has_cell("r", key):
            assert data[["metric", "value"]].equals(rows[["metric", "value"]])
            return "whole"
        assert data.empty
        return "absent"

    found = _kill_at_every_step(tmp_path, lambda: store.write_cell("r", key, rows, {"v": 1}), check, half_writes=True)
    assert any("half-way" in where for where, _ in found), found
    assert {tag for _, tag in found} <= {"absent", "whole"} and store.has_cell("r", key)

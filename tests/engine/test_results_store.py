"""The results store: whole cells only, resumable, tidy rows with provenance."""
from __future__ import annotations

import pandas as pd
import pytest

from engine.results import TIDY_COLUMNS, ResultsStore


def _rows(measure, seed):
    return pd.DataFrame([{"model": "m", "seed": seed, "dataset": "rt", "measure": measure, "strategy": "ratio",
                          "step": i, "ratio": i / 2, "metric": "accuracy", "value": 0.9 - 0.2 * i, "p_value": 0.5}
                         for i in range(3)])


def test_cells_roundtrip_with_provenance_and_resume(tmp_path):
    store = ResultsStore(tmp_path)
    cell = {"model": "m", "dataset": "rt", "measure": "loo-sign", "seed": 0}
    assert not store.has_cell("run1", cell)
    store.write_cell("run1", cell, _rows("loo-sign", 0), {"command": "python -m engine mask-sweep ...", "code_version": "x"})
    store.write_cell("run1", {**cell, "seed": 1}, _rows("loo-sign", 1), {"code_version": "x"})
    assert store.has_cell("run1", cell), "a finished cell is skipped when the run resumes"
    df = store.load("run1")
    assert len(df) == 6 and set(TIDY_COLUMNS) <= set(df.columns) and set(df["run"]) == {"run1"}
    assert store.runs() == ["run1"]
    assert store.provenance("run1")[0]["provenance"]["code_version"] == "x"


def test_half_written_cell_does_not_count(tmp_path):
    store = ResultsStore(tmp_path)
    cell = {"model": "m", "dataset": "rt", "measure": "random", "seed": 0}
    store.write_cell("r", cell, _rows("random", 0), {})
    json_file = next((tmp_path / "r" / "cells").glob("*.json"))
    json_file.unlink()  # as if the process died between the two renames
    assert not store.has_cell("r", cell) and store.load("r").empty


def test_bad_rows_and_names_are_refused(tmp_path):
    store = ResultsStore(tmp_path)
    with pytest.raises(ValueError, match="lack the columns"):
        store.write_cell("r", {"model": "m"}, pd.DataFrame({"model": ["m"]}), {})
    with pytest.raises(ValueError, match="run name"):
        store.load("../x")


def test_a_subset_is_compared_with_the_random_curve_of_the_same_examples(tmp_path):
    """One run may hold the whole split for cheap measures and a subset for beam: each measure's RACU must
    use the random curve over the same examples, also for cells written before rows carried n_examples."""
    from engine.faithfulness.metrics import racu
    from engine.faithfulness.summary import area_metrics_per_seed

    store = ResultsStore(tmp_path)
    x = [0.0, 0.5, 1.0]
    curves = {("random", 100): [0.9, 0.7, 0.5], ("loo-sign", 100): [0.9, 0.3, 0.5],
              ("random", 20): [0.9, 0.85, 0.5], ("beam", 20): [0.9, 0.1, 0.5]}
    for (measure, n), values in curves.items():
        rows = pd.DataFrame([{"model": "m", "seed": 0, "dataset": "rt", "measure": measure, "strategy": "masked",
                              "base_model": "tiny", "step": i, "ratio": r, "metric": "accuracy", "value": v,
                              "p_value": 0.5} for i, (r, v) in enumerate(zip(x, values))])
        if n == 100:
            rows["n_examples"] = n  # as run_cell writes them now
        # the n = 20 cells are old-style: the count is only in the provenance
        store.write_cell("mixed", {"model": "m", "measure": measure, "limit": n}, rows, {"n_examples": n})
    data = store.load("mixed")
    assert sorted(data["n_examples"].unique()) == [20, 100]
    per_seed = area_metrics_per_seed(data).set_index(["measure", "n_examples"])["racu"]
    assert per_seed[("beam", 20)] == pytest.approx(racu(x, curves["beam", 20], curves["random", 20]))
    assert per_seed[("loo-sign", 100)] == pytest.approx(racu(x, curves["loo-sign", 100], curves["random", 100]))
    assert per_seed[("beam", 20)] != pytest.approx(racu(x, curves["beam", 20], curves["random", 100]))
    assert ("beam", 100) not in per_seed.index and ("loo-sign", 20) not in per_seed.index


def test_fingerprint_changes_exactly_when_a_cell_is_written_or_removed(tmp_path):
    store = ResultsStore(tmp_path)
    empty = store.fingerprint()
    assert empty == () and store.fingerprint() == empty
    cell = {"model": "m", "dataset": "rt", "measure": "random", "seed": 0}
    store.write_cell("r", cell, _rows("random", 0), {})
    written = store.fingerprint()
    assert written != empty and store.fingerprint() == written, "reading does not change it"
    store.write_cell("r", cell, _rows("random", 0).assign(value=0.1), {"again": True})  # a cell rewritten in place
    rewritten = store.fingerprint()
    assert rewritten != written
    next((tmp_path / "r" / "cells").glob("*.json")).unlink()
    assert store.fingerprint() == empty


def test_cells_written_before_the_schedule_column_read_with_the_right_x_axis(tmp_path):
    """Old ROAR count cells stored k in `ratio`: read back, k moves to `count` and the x-axis becomes k / k_max;
    old quantile and benchmark cells read as they were, labelled with their schedule."""
    store = ResultsStore(tmp_path)
    counted = _rows("random", 0).assign(ratio=[0.0, 5.0, 10.0], method="roar")
    store.write_cell("old", {"measure": "random", "strategy": "count", "method": "roar"}, counted, {})
    store.write_cell("old", {"measure": "random", "strategy": "quantile", "method": "roar"},
                     _rows("random", 0).assign(method="roar"), {})
    store.write_cell("old", {"measure": "random"}, _rows("random", 0), {"n_examples": 3})
    data = store.load("old")
    by_schedule = {name: part.sort_values("step") for name, part in data.groupby("schedule")}
    assert set(by_schedule) == {"count 0..10", "quantile", "ratio"}
    counted = by_schedule["count 0..10"]
    assert list(counted["count"]) == [0, 5, 10] and list(counted["ratio"]) == [0, 0.5, 1]
    assert list(by_schedule["quantile"]["ratio"]) == [0, 0.5, 1] and by_schedule["quantile"]["count"].isna().all()
    assert list(by_schedule["ratio"]["n_examples"]) == [3, 3, 3]


def test_fingerprint_sees_a_rewrite_of_equal_size_and_time(tmp_path):
    """On file systems with coarse timestamps a rewritten cell can keep its size and mtime: the inode of the
    renamed-in file still tells it apart."""
    import os

    store = ResultsStore(tmp_path)
    cell = {"model": "m", "dataset": "rt", "measure": "random", "seed": 0}
    store.write_cell("r", cell, _rows("random", 0), {"v": 1})
    path = next((tmp_path / "r" / "cells").glob("*.json"))
    before = store.fingerprint()
    stat = path.stat()
    store.write_cell("r", cell, _rows("random", 0), {"v": 2})  # same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as if the clock tick had not moved
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert store.fingerprint() != before


def test_curves_on_different_levels_are_never_pooled(tmp_path):
    """Two cells of one measure and seed masked on different grids (--ratios changed within a run) differ in no
    other column: each must be compared with the random curve of its own grid, not with a merged curve."""
    from engine.faithfulness.metrics import racu
    from engine.faithfulness.summary import area_metrics_per_seed, curve_bands

    store = ResultsStore(tmp_path)
    grids = {"coarse": [0.0, 0.5, 1.0], "fine": [0.0, 0.25, 0.5, 0.75, 1.0]}
    curves = {("random", "coarse"): [0.9, 0.7, 0.5], ("loo-sign", "coarse"): [0.9, 0.3, 0.5],
              ("random", "fine"): [0.9, 0.85, 0.8, 0.6, 0.5], ("loo-sign", "fine"): [0.9, 0.6, 0.55, 0.52, 0.5]}
    for (measure, grid), values in curves.items():
        rows = pd.DataFrame([{"model": "m", "seed": 0, "dataset": "rt", "measure": measure, "strategy": "masked",
                              "base_model": "tiny", "step": i, "ratio": r, "schedule": "ratio", "metric": "accuracy",
                              "value": v, "p_value": 0.5, "n_examples": 10}
                             for i, (r, v) in enumerate(zip(grids[grid], values))])
        store.write_cell("levels", {"model": "m", "measure": measure, "ratios": grids[grid]}, rows, {})
    data = store.load("levels")
    assert set(data["grid"]) == {"0,0.5,1", "0,0.25,0.5,0.75,1"}
    per_seed = area_metrics_per_seed(data).set_index(["measure", "grid"])["racu"]
    for grid, x in grids.items():
        key = ",".join(f"{v:g}" for v in x)
        assert per_seed[("loo-sign", key)] == pytest.approx(racu(x, curves["loo-sign", grid], curves["random", grid]))
    bands = curve_bands(data)
    assert (bands["seeds"] == 1).all(), "a point of one grid is never averaged with the other grid's point"


def test_every_shipped_curve_has_provenance_and_a_random_baseline_of_its_own_examples():
    """The results/ folder the dashboard opens on: each cell names the command, code and machine that made it,
    and each measure's curve is compared with a random curve of the same run, seed, examples and levels."""
    from engine.faithfulness.summary import GROUP, area_metrics_per_seed
    from engine.runtime import PROJECT_ROOT

    store = ResultsStore(PROJECT_ROOT / "results")
    assert store.runs(), "results/ ships benchmark runs"
    for run in store.runs():
        for recorded in store.provenance(run):
            missing = {"command", "code_version", "created", "machine"} - set(recorded["provenance"])
            assert not missing, (run, recorded["cell"], missing)
        data = store.load(run)
        keys = [c for c in GROUP if c in data.columns] + ["seed", "measure"]
        curves = data[keys].drop_duplicates()
        per_seed = area_metrics_per_seed(data)
        assert len(per_seed) == len(curves), f"{run}: a curve without a random baseline on the same examples"
        assert (per_seed.loc[per_seed["measure"] == "random", "racu"] == 0).all()


def test_another_split_is_its_own_group_and_two_checkpoints_for_one_seed_are_refused(tmp_path):
    """A validation-split sweep in the same run measures other examples: it is compared with the random curve of
    its own split, not pooled with the test split's (pooled, each curve repeats every ratio). Two checkpoints of
    one encoder and seed in one group cannot be paired: the summary says so instead of pairing at random."""
    from engine.faithfulness.metrics import racu
    from engine.faithfulness.summary import area_metrics_per_seed

    store = ResultsStore(tmp_path)
    x = [0.0, 0.5, 1.0]
    curves = {("random", "test"): [0.9, 0.7, 0.5], ("loo-sign", "test"): [0.9, 0.3, 0.5],
              ("random", "validation"): [0.8, 0.75, 0.5], ("loo-sign", "validation"): [0.8, 0.6, 0.5]}
    for (measure, split), values in curves.items():
        rows = pd.DataFrame([{"model": "m-s0", "seed": 0, "dataset": "rt", "measure": measure, "strategy": "masked",
                              "base_model": "tiny", "step": i, "ratio": r, "metric": "accuracy", "value": v,
                              "p_value": 0.5, "n_examples": 10} for i, (r, v) in enumerate(zip(x, values))])
        if split == "validation":
            rows["split"] = split  # as run_cell writes rows now; the test cells are old-style (split in the JSON only)
        store.write_cell("splits", {"model": "m-s0", "measure": measure, "split": split}, rows, {"n_examples": 10})
    data = store.load("splits")
    assert sorted(data["split"].unique()) == ["test", "validation"]
    per_seed = area_metrics_per_seed(data).set_index(["measure", "split"])["racu"]
    for split in ("test", "validation"):
        assert per_seed[("loo-sign", split)] == pytest.approx(racu(x, curves["loo-sign", split], curves["random", split]))

    other = pd.DataFrame([{"model": "m-lr2-s0", "seed": 0, "dataset": "rt", "split": "test", "measure": "random",
                           "strategy": "masked", "base_model": "tiny", "step": i, "ratio": r, "metric": "accuracy",
                           "value": 0.6, "p_value": 0.5, "n_examples": 10} for i, r in enumerate(x)])
    store.write_cell("splits", {"model": "m-lr2-s0", "measure": "random"}, other, {})
    with pytest.raises(ValueError, match=r"several checkpoints .*'m-lr2-s0', 'm-s0'"):
        area_metrics_per_seed(store.load("splits"))


def test_a_memoised_load_sees_every_write_rewrite_and_removal_and_hands_out_copies(tmp_path):
    """`load` is memoised per process under the run's file fingerprint: a new cell, a cell rewritten in place
    (equal size) and a removed cell are each read back at once, and changing a loaded frame changes no later load."""
    store = ResultsStore(tmp_path)
    cell = {"model": "m", "dataset": "rt", "measure": "loo-sign", "seed": 0}
    store.write_cell("r", cell, _rows("loo-sign", 0), {})
    first = store.load("r")
    first.loc[:, "value"] = -1.0
    assert (store.load("r")["value"] > 0).all(), "a caller's change to its frame leaks into the memo"
    store.write_cell("r", {**cell, "seed": 1}, _rows("loo-sign", 1), {})
    assert len(store.load("r")) == 6, "a new cell is not seen"
    rewritten = _rows("loo-sign", 1).assign(value=0.123)
    store.write_cell("r", {**cell, "seed": 1}, rewritten, {})
    assert (store.load("r").query("seed == 1")["value"] == 0.123).all(), "a rewritten cell is not seen"
    next((tmp_path / "r" / "cells").glob("*.json")).unlink()
    assert len(store.load("r")) == 3, "a removed cell is still seen"


def _assert_same_frame(got: pd.DataFrame, want: pd.DataFrame, where) -> None:
    assert list(got.columns) == list(want.columns), where
    assert [str(t) for t in got.dtypes] == [str(t) for t in want.dtypes], where
    pd.testing.assert_frame_equal(got, want, check_exact=True, obj=str(where))
    for column in got.select_dtypes(include="object").columns:
        assert [type(v) for v in got[column]] == [type(v) for v in want[column]], (where, column)


def test_a_cell_is_read_as_pd_read_parquet_reads_it(tmp_path):
    """ResultsStore reads a cell's parquet through pyarrow directly (pd.read_parquet's dataset layer and threads
    cost three times as much on small cells): the frame must be the one pd.read_parquet gives, every dtype, value and
    missing value alike, on a cell of every kind the store holds (one per shipped run) and on one with every column
    type the cells use."""
    from engine.runtime import PROJECT_ROOT

    cells = [next(p for p in sorted(d.glob("*.parquet")) if p.with_suffix(".json").is_file())
             for d in sorted((PROJECT_ROOT / "results").glob("**/cells"))]
    assert len(cells) > 10, "results/ ships runs of several kinds"
    mixed = pd.DataFrame({"model": ["m", None, "x"], "seed": [0, 1, 2], "value": [0.5, float("nan"), -0.0],
                          "passes": [True, False, True], "control": [True, None, False], "k": ["1", "2", None]})
    mixed.to_parquet(tmp_path / "mixed.parquet", index=False)
    for path in [*cells, tmp_path / "mixed.parquet"]:
        _assert_same_frame(ResultsStore._read_parquet(path), pd.read_parquet(path), path)


def test_a_run_of_cells_with_different_columns_keeps_each_column_where_it_first_appears(tmp_path):
    """`load` adds each cell's grid and run to the whole frame: the columns stay in the order of concatenating cells
    that carried them (a column only later cells have comes after the first cell's grid and run), with their dtypes."""
    store = ResultsStore(tmp_path)
    store.write_cell("r", {"model": "m", "seed": 0}, _rows("random", 0), {})
    store.write_cell("r", {"model": "m", "seed": 1}, _rows("random", 1).assign(n_examples=5, extra=True), {})
    data = store.load("r")
    cells = sorted((tmp_path / "r" / "cells").glob("*.parquet"))
    frames = [ResultsStore._read_cell_columns(p) for p in cells]
    expected = pd.concat([f.assign(grid=ResultsStore._grid(f), run="r") for f in frames], ignore_index=True)
    expected["method"] = expected["method"].fillna("recursive masking") if "method" in expected else "recursive masking"
    if "count" not in expected:
        expected["count"] = float("nan")
    _assert_same_frame(data, expected, "r")
    assert list(data.columns).index("extra") > list(data.columns).index("run")

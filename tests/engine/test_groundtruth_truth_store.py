"""The truth stored beside a planted checkpoint (engine.groundtruth.truth_store): a second report-card process reads
it instead of establishing it again (5-6 CPU-minutes on SmolLM2), only under the same key; and the truth cell and
the cost table count establishing it once (the truth cells counted it twice).

The planted model is test_groundtruth_min_deciding's hand-built `or` head with the trigger "trig" (12 deciding
inputs), given an artifacts folder of its own."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from card_stubs import card_stubs  # noqa: F401 (a fixture)
from test_groundtruth_min_deciding import MODEL, N_DECIDING, SPEC, _words_dataset, planted  # noqa: F401 (fixture)

import engine.groundtruth.truth as truth_module
from engine.groundtruth.truth_store import TRUTH_PREFIX, load_or_establish_truth

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture()
def stored(planted, tmp_path, monkeypatch):  # noqa: F811
    """The planted model with an artifacts folder, its base data served to the key's input hash too, and a count
    of the times the truth is established."""
    import engine.data.digest

    data = _words_dataset()
    monkeypatch.setattr(engine.data.digest, "get_dataset", lambda name, split_seed=0: data)
    planted.metadata["artifacts_dir"] = str(tmp_path / "artifacts")
    calls = []
    real = truth_module.establish_truth

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(truth_module, "establish_truth", counted)
    return planted, tmp_path / "artifacts", calls


def test_a_second_load_reads_the_stored_truth_and_gives_the_same_truth(stored):
    classifier, folder, calls = stored
    first = load_or_establish_truth(classifier, min_deciding=5)
    assert len(calls) == 1 and len(first.deciding) == N_DECIDING
    assert len(list(folder.glob(f"{TRUTH_PREFIX}*.parquet"))) == 1 and len(list(folder.glob(f"{TRUTH_PREFIX}*.json"))) == 1
    again = load_or_establish_truth(classifier, min_deciding=5)
    assert len(calls) == 1, "the stored truth was established again"
    assert "stored" in again.options and "stored" not in first.options
    pd.testing.assert_frame_equal(again.inputs, first.inputs)
    assert again.rates == first.rates and again.spec == first.spec and again.target == first.target
    assert (again.learned, again.reason, again.control) == (first.learned, first.reason, first.control)
    assert again.options["cpu_seconds"] == first.options["cpu_seconds"]  # what establishing it took


def test_another_key_or_an_unreadable_record_establishes_it_again(stored, monkeypatch):
    classifier, folder, calls = stored
    load_or_establish_truth(classifier, min_deciding=5)
    load_or_establish_truth(classifier, min_deciding=6)  # another min_deciding: another truth
    load_or_establish_truth(classifier, min_deciding=5, seed=1)  # other insertion positions
    monkeypatch.setattr(truth_module, "LEARNED_LOWER_BOUND", 0.9)  # another threshold decides `learned` otherwise
    load_or_establish_truth(classifier, min_deciding=5)
    assert len(calls) == 4
    monkeypatch.setattr(truth_module, "LEARNED_LOWER_BOUND", 0.25)
    for meta in folder.glob(f"{TRUTH_PREFIX}*.json"):
        meta.write_text("{not json", encoding="utf-8")
    truth = load_or_establish_truth(classifier, min_deciding=5)
    assert len(calls) == 5 and truth.learned
    recorded = [json.loads(p.read_text(encoding="utf-8")) for p in folder.glob(f"{TRUTH_PREFIX}*.json")
                if p.read_text(encoding="utf-8").startswith("{\n")]
    assert recorded and recorded[0]["key"]["min_deciding"] == 5  # overwritten whole


def test_a_model_without_an_artifacts_folder_establishes_it_every_time(planted, monkeypatch):  # noqa: F811
    calls = []
    real = truth_module.establish_truth
    monkeypatch.setattr(truth_module, "establish_truth", lambda *a, **k: calls.append(k) or real(*a, **k))
    planted.metadata["artifacts_dir"] = ""
    load_or_establish_truth(planted, min_deciding=5)
    load_or_establish_truth(planted, min_deciding=5)
    assert len(calls) == 2


def test_the_truth_cell_counts_establishing_the_truth_once(planted, monkeypatch):  # noqa: F811
    """The truth cell's cpu_seconds is the truth's own cost (recorded with it) plus the cell's bookkeeping, not
    twice the truth's cost (it added the recorded cost to a process time that already held it)."""
    import time

    from engine.groundtruth.card_cells import TruthCell
    from engine.groundtruth.card_compute import compute_truth_cell
    from engine.sweeps import CellContext

    real = truth_module.establish_truth

    def slow(*args, **kwargs):
        started = time.process_time()
        while time.process_time() - started < 1.0:  # a truth that costs one CPU-second to establish
            pass
        truth = real(*args, **kwargs)
        truth.options["cpu_seconds"] = round(time.process_time() - started, 1)
        return truth

    monkeypatch.setattr(truth_module, "establish_truth", slow)
    planted.metadata["artifacts_dir"] = ""
    result = compute_truth_cell(TruthCell(MODEL, min_deciding=5), CellContext())
    recorded = result.provenance["options"]["cpu_seconds"]
    assert recorded >= 1.0
    assert result.provenance["cpu_seconds"] == pytest.approx(recorded, abs=0.5)


def test_the_cost_table_reads_a_truth_cells_cost_from_the_truth_it_recorded(planted, tmp_path):  # noqa: F811
    """Truth cells stored before the fix hold twice the truth's cost in cpu_seconds: the table takes the cost the
    truth recorded (options.cpu_seconds)."""
    from engine.groundtruth.card import card_store
    from engine.groundtruth.card_cells import TruthCell
    from engine.groundtruth.card_compute import compute_truth_cell
    from engine.reports.groundtruth_tables import cost_markdown
    from engine.sweeps import CellContext

    planted.metadata["artifacts_dir"] = ""
    cell = TruthCell(MODEL, min_deciding=5)
    result = compute_truth_cell(cell, CellContext())
    provenance = {**result.provenance, "cpu_seconds": 740.6, "options": {**result.provenance["options"],
                                                                          "cpu_seconds": 370.3}}
    card_store(tmp_path / "groundtruth").write_cell("run", cell.key(), result.rows, provenance)
    table = cost_markdown("run")(tmp_path)
    assert "| 370 | 370 |" in table and "741" not in table

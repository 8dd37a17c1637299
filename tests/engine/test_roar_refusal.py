"""`roar --model` refuses a folder with pickled weights only before its sweep starts, like `train` and every other
command: one error line with the conversion command, no sweep cell, nothing unpickled."""
from __future__ import annotations

import torch

from engine.cli import main


def test_roar_refuses_pickled_weights_up_front(tmp_path, monkeypatch, capsys):
    from transformers import AutoConfig

    from engine.models import resolve_encoder

    monkeypatch.setenv("ENGINE_MODELS_CACHE", str(tmp_path / "models_cache"))
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    folder = tmp_path / "pickled"
    folder.mkdir()
    AutoConfig.from_pretrained(resolve_encoder("tiny")).save_pretrained(str(folder))
    (folder / "pytorch_model.bin").write_bytes(b"not to be opened")

    def no_sweep(*args, **kwargs):
        raise AssertionError("the sweep started: the folder should have been refused before")

    def no_unpickling(*args, **kwargs):
        raise AssertionError("torch.load was called: a pickle was opened")

    monkeypatch.setattr("engine.faithfulness.retraining.run_retraining_sweep", no_sweep)
    monkeypatch.setattr(torch, "load", no_unpickling)
    code = main(["roar", "--model", str(folder), "--dataset", "toy", "--measures", "random", "--run", "r"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "pickle" in err and "convert" in err.lower(), err
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.json"))

"""`plant --quiet` silences only the per-batch bar: one line per epoch with the elapsed time and the ETA still
shows that a long plant is moving (a plant of 50 minutes on a busy machine printed nothing before)."""
from __future__ import annotations

import io
import re

import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


def test_epoch_lines_give_the_eta_from_the_epochs_done():
    """ETA = elapsed / epochs done x epochs left: 30 s for the first of 3 epochs leaves 60 s."""
    from engine.cli.plant import EpochLines

    now = [0.0]
    out = io.StringIO()
    lines = EpochLines(out=out, clock=lambda: now[0])
    lines({"stage": "train", "epoch": 1, "epochs": 3, "step": 1, "steps": 30, "loss": 0.7})
    now[0] = 30.0
    lines({"stage": "validate", "epoch": 1, "epochs": 3, "train_loss": 0.69, "val_unmasked": 0.61})
    now[0] = 80.0
    lines({"stage": "validate", "epoch": 2, "epochs": 3, "train_loss": 0.5, "val_unmasked": 0.7})
    text = out.getvalue().splitlines()
    assert text[0] == "training: 3 epoch(s) of 30 batches in all"
    assert text[1] == "epoch 1/3:  train loss 0.6900  validation 0.6100  elapsed 0:30  ETA 1:00"
    assert text[2] == "epoch 2/3:  train loss 0.5000  validation 0.7000  elapsed 1:20  ETA 0:40"


def test_plant_quiet_prints_every_epoch_with_its_eta_and_no_batch_bar(models_cache, capfd):
    """A real plant (tiny on the toy set, 40 training examples, 2 epochs): with --quiet stdout holds one line per
    epoch with its ETA, and nothing a tqdm bar writes ('batch/s', a carriage return) reaches stderr."""
    from engine.cli import main

    assert main(["plant", "--model", "tiny", "--dataset", "toy", "--mechanism", "redundant", "--k", "3",
                 "--epochs", "2", "--train-limit", "40", "--eval-limit", "20", "--quiet"]) == 0
    out, err = capfd.readouterr()
    epochs = re.findall(r"^epoch (\d)/2: .*elapsed \d+:\d\d  ETA \d+:\d\d$", out, flags=re.M)
    assert epochs == ["1", "2"], out
    assert "batch" not in err and "\r" not in err, err
    assert "carry one or more of the words" in out

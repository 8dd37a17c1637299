"""Running a command of the engine's CLI in the test process, as `python -m engine NAME ARGS` would, and saving a
classifier where a command finds it by id."""
from __future__ import annotations

import argparse
import importlib


def run_command(name: str, argv: list[str]) -> int:
    """engine/cli/<name>.py's run(args) on `argv` parsed by its configure(parser), with the command line recorded as
    the CLI records it; returns the exit status."""
    module = importlib.import_module(f"engine.cli.{name.replace('-', '_')}")
    parser = argparse.ArgumentParser()
    module.configure(parser)
    args = parser.parse_args(argv)
    args.command_line = f"python -m engine {name} " + " ".join(argv)
    return module.run(args)


def save_for_commands(classifier, model_id: str, tmp_path, monkeypatch) -> str:
    """`classifier` saved as `model_id` in the test's models cache (the `models_cache` fixture's), the results store
    a folder of this test's (ENGINE_RESULTS_DIR); returns the id."""
    from engine.models import save_classifier

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    save_classifier(classifier, model_id, overwrite=True)
    return model_id

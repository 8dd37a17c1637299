"""The command line: it trains and lists models, teaches with --help, and refuses bad input with one
clear line and exit code 2, changing nothing."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import command_name, main

ROOT = Path(__file__).resolve().parents[2]


def test_help_lists_commands_and_train_options():
    out = subprocess.run([sys.executable, "-m", "engine", "train", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    for option in ("--model", "--dataset", "--strategy", "--epochs", "--lr", "--seed", "--overwrite", "Strategies", "only-masking"):
        assert option in out.stdout


def test_top_level_help_imports_no_torch_and_lists_every_command():
    """`--help` answers without loading torch (only the chosen command is configured), and lists every
    command module with its one-line help."""
    code = ("import sys\nfrom engine.cli import COMMAND_MODULES, main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules, 'torch was imported for --help'\n")
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    from engine.cli import COMMAND_MODULES, command_name

    for module in COMMAND_MODULES:
        assert command_name(module) in out.stdout


@pytest.mark.parametrize("module", __import__("engine.cli", fromlist=["COMMAND_MODULES"]).COMMAND_MODULES)
def test_every_command_module_has_the_one_interface_and_a_help_with_examples(module, capsys):
    """Each command is a module with HELP, configure(parser) and run(args); its --help exits 0 and teaches by
    example: it shows at least one `python -m engine COMMAND ...` line, and every example shown is accepted
    by the command's own parser (an example with a renamed or missing option fails here)."""
    import importlib
    import shlex

    from engine.cli import build_parser

    mod = importlib.import_module(module)
    name = command_name(module)
    assert isinstance(mod.HELP, str) and callable(mod.configure) and callable(mod.run)
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    help_text = capsys.readouterr().out.replace("\\\n", " ")  # join an example's continued lines
    examples = [line.strip() for line in help_text.splitlines() if line.strip().startswith(f"python -m engine {name}")]
    assert examples, f"`{name} --help` shows no example:\n{help_text}"
    for example in examples:
        argv = shlex.split(example, comments=True)[3:]
        try:
            build_parser(argv).parse_args(argv)
        except SystemExit as err:
            pytest.fail(f"the example {example!r} of `{name} --help` is refused by its parser ({capsys.readouterr().err.strip()})"
                        if err.code else f"{example!r} only prints help")


def test_the_command_list_names_each_old_name_as_an_alias_of_its_new_one():
    """`--help` lists every old command name beside the new name it stands for and the release it is kept until."""
    from engine.cli import ALIASES, ALIASES_KEPT_UNTIL

    assert ALIASES == {"faithfulness": "mask", "benchmark": "mask-sweep", "evaluate": "metrics", "report": "docs-tables"}
    out = subprocess.run([sys.executable, "-m", "engine", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    listing = " ".join(out.stdout.split())
    for old, new in ALIASES.items():
        assert f"{old} alias of {new}, kept until {ALIASES_KEPT_UNTIL}" in listing, old
        assert new in {command_name(m) for m in __import__("engine.cli", fromlist=["COMMAND_MODULES"]).COMMAND_MODULES}


@pytest.mark.parametrize("old, new, argv", [
    ("faithfulness", "mask", ["--model", "m", "--measure", "random", "--counts", "3"]),
    ("benchmark", "mask-sweep", ["--datasets", "toy", "--measures", "random", "--seeds", "0", "1"]),
    ("evaluate", "metrics", ["--model", "m", "--dataset", "toy", "--measures", "random", "--operator", "delete"]),
    ("report", "docs-tables", ["--check", "--tables", "summary"]),
])
def test_an_old_command_name_still_runs_its_command_and_says_it_is_an_alias(old, new, argv, capsys, monkeypatch):
    """An old name parses exactly as its new name does, runs the new name's command, its --help opens with the
    note, and running it prints the note on stderr before the command's own output."""
    import engine.cli as cli
    from engine.cli import ALIASES_KEPT_UNTIL, build_parser

    old_args, new_args = build_parser([old, *argv]).parse_args([old, *argv]), build_parser([new, *argv]).parse_args([new, *argv])
    assert old_args._run is new_args._run
    assert {k: v for k, v in vars(old_args).items() if k != "command"} == \
        {k: v for k, v in vars(new_args).items() if k != "command"}
    with pytest.raises(SystemExit) as exit_:
        main([old, "--help"])
    assert exit_.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"`{old}` is an alias of {new}, kept until {ALIASES_KEPT_UNTIL}: use `python -m engine {new}`" in help_text
    ran = []
    real_build = cli.build_parser

    def recording_build(argv_):  # run the real parser, but record the chosen command instead of doing its work
        parser = real_build(argv_)
        parser.set_defaults(_run=lambda args: ran.append(args) or 0)
        sub = parser._subparsers._group_actions[0].choices[argv_[0]]
        sub.set_defaults(_run=lambda args: ran.append(args) or 0)
        return parser

    monkeypatch.setattr(cli, "build_parser", recording_build)
    assert main([old, *argv]) == 0
    assert len(ran) == 1 and ran[0].command == old and ran[0].command_line == "python -m engine " + " ".join([old, *argv])
    assert f"note: `{old}` is an alias of {new}, kept until {ALIASES_KEPT_UNTIL}" in capsys.readouterr().err
    assert main([new, *argv]) == 0
    assert "alias" not in capsys.readouterr().err, "the new name prints no note"


def test_a_bug_is_not_reported_as_a_user_error(monkeypatch):
    """The CLI turns EngineError into one line and exit 2, but lets any other exception through with its
    traceback: a bug must not read like a user mistake."""
    import engine.cli.datasets as datasets_command

    def broken(args):
        raise ValueError("an internal bug")

    monkeypatch.setattr(datasets_command, "run", broken)
    with pytest.raises(ValueError, match="internal bug"):
        main(["datasets"])


def test_train_then_list(models_cache, capsys):
    assert main(["train", "--model", "tiny", "--dataset", "toy", "--epochs", "1", "--lr", "3e-4", "--quiet", "--id", "cli-toy"]) == 0
    assert (models_cache / "cli-toy" / "metadata.json").is_file()
    out = capsys.readouterr().out
    assert "saved" in out and "class-majority baseline" in out
    assert main(["models"]) == 0
    listing = capsys.readouterr().out
    assert "cli-toy" in listing and "toy" in listing and "masked" in listing
    # training again under the same id is refused without --overwrite, and the checkpoint is kept
    before = (models_cache / "cli-toy" / "model.safetensors").read_bytes()
    assert main(["train", "--dataset", "toy", "--epochs", "1", "--quiet", "--id", "cli-toy"]) == 2
    assert "exists" in capsys.readouterr().err
    assert (models_cache / "cli-toy" / "model.safetensors").read_bytes() == before


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--dataset", "sst2"], "unknown dataset 'sst2'"),
        (["train", "--model", "roberta-base"], "unknown model 'roberta-base'"),
        (["train", "--dataset", "toy", "--epochs", "0"], "epochs must be >= 1"),
        (["train", "--dataset", "toy", "--id", "a/b/c"], "model id"),
        (["roar", "--dataset", "toy", "--measures", "random", "saliency"], "unknown measure(s) saliency"),
        (["roar", "--dataset", "sst2", "--measures", "random"], "unknown dataset 'sst2'"),
        (["roar", "--dataset", "toy", "--measures", "random", "--steps", "0.5,1.5"], "strictly between 0 and 1"),
    ],
)
def test_bad_input_is_one_clear_line_and_nothing_written(models_cache, capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not models_cache.exists() or not any(models_cache.iterdir())


@pytest.mark.parametrize(
    "argv, message",
    [
        (["mask-sweep", "--datasets", "toy", "--measures", "random", "--counts", "0"], "whole number >= 1"),
        (["mask-sweep", "--datasets", "toy", "--measures", "random", "--counts", "3", "--ratios", "0,1"], "not allowed with"),
        (["mask", "--model", "m", "--measure", "random", "--counts", "3", "--ratios", "0,1"], "not allowed with"),
    ],
)
def test_bad_arguments_are_a_usage_line_before_any_work(models_cache, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_models_lists_broken_checkpoint_with_reason(models_cache, capsys):
    (models_cache / "half-copied").mkdir(parents=True)
    (models_cache / "half-copied" / "config.json").write_text("{}")
    assert main(["models"]) == 0
    assert "BROKEN" in capsys.readouterr().out


def test_benchmark_writes_cells_prints_the_area_table_and_resumes(models_cache, toy_classifier, tmp_path, monkeypatch, capsys):
    """`benchmark` computes every cell into the results store, prints ACU/RACU against random, and a
    second call with the same arguments computes nothing (resume skips finished cells)."""
    from engine.models import save_classifier
    from engine.results import ResultsStore

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    save_classifier(toy_classifier, "cli-bench-s0")
    argv = ["mask-sweep", "--model-template", "cli-bench-s{seed}", "--datasets", "toy", "--measures", "random", "loo-sign",
            "--seeds", "0", "--limit", "12", "--ratios", "0,0.5,1", "--run", "cli", "--workers", "1"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "2 cells computed, 0 already in the store" in out
    assert "loo-sign seed 0: 12/12 examples" in err, "the progress bar follows the examples within a cell"
    assert "| toy | tiny | recursive masking | 12 | loo-sign | 1 |" in out
    rows = ResultsStore(tmp_path / "results").load("cli")
    assert sorted(rows["measure"].unique()) == ["loo-sign", "random"] and sorted(rows["ratio"].unique()) == [0, 0.5, 1]
    assert set(rows["n_examples"]) == {12}, "every row says how many examples its curve averages over"
    recorded = ResultsStore(tmp_path / "results").provenance("cli")[0]["provenance"]
    weights = (models_cache / "cli-bench-s0" / "model.safetensors").read_bytes()
    assert recorded["checkpoint_sha256"] == hashlib.sha256(weights).hexdigest(), "cells name the exact weights"
    assert main(argv) == 0
    assert "0 cells computed, 2 already in the store" in capsys.readouterr().out
    # The same run on other levels: two grids of one measure and seed, compared each with its own random curve.
    finer = argv[: argv.index("--ratios") + 1] + ["0,0.25,0.5,0.75,1"] + argv[argv.index("--ratios") + 2 :]
    assert main(finer) == 0
    out = capsys.readouterr().out
    assert "| recursive masking (levels 0,0.5,1) | 12 | loo-sign | 1 |" in out
    assert "| recursive masking (levels 0,0.25,0.5,0.75,1) | 12 | loo-sign | 1 |" in out


def test_benchmark_refuses_to_pair_curves_of_other_weights_with_the_run(models_cache, toy_classifier, tmp_path,
                                                                          monkeypatch, capsys):
    """A run built up over sessions: a checkpoint id retrained elsewhere keeps its name but not its weights. A new
    cell on the same examples as cells computed from other weights is refused before any work, naming both
    hashes; on other examples (another --limit) it is its own comparison and goes ahead."""
    import torch
    from safetensors.torch import load_file, save_file

    from engine.models import save_classifier
    from engine.results import ResultsStore

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    folder = save_classifier(toy_classifier, "guard-s0")
    argv = ["mask-sweep", "--model-template", "guard-s{seed}", "--datasets", "toy", "--measures", "random",
            "--seeds", "0", "--limit", "6", "--ratios", "0,0.5,1", "--run", "guarded"]
    assert main(argv) == 0
    same = argv[: argv.index("random") + 1] + ["grad-l2"] + argv[argv.index("random") + 1 :]
    assert main(same) == 0, "the same weights: a new measure joins the run"
    assert "1 cells computed, 1 already in the store" in capsys.readouterr().out
    weights = Path(folder) / "model.safetensors"
    tensors = load_file(str(weights))
    name = next(iter(tensors))
    tensors[name] = tensors[name] + 1e-6 * torch.ones_like(tensors[name])  # "retrained on another CPU"
    save_file(tensors, str(weights), metadata={"format": "pt"})
    more = argv[: argv.index("random") + 1] + ["loo-sign"] + argv[argv.index("random") + 1 :]
    assert main(more) == 2
    err = capsys.readouterr().err
    assert "computed from other weights" in err and "guard-s0" in err
    assert set(ResultsStore(tmp_path / "results").load("guarded")["measure"]) == {"random", "grad-l2"}, "nothing new"
    fewer = [a if a != "6" else "4" for a in more]
    assert main(fewer) == 0, "other examples: a comparison of their own, with their own random curve"
    assert "2 cells computed" in capsys.readouterr().out


def test_masf_then_faithfulness_of_one_text_by_counts_and_of_a_split(models_cache, toy_classifier, capsys):
    """`masf` stores the fit beside the checkpoint and reports both checks; `faithfulness --text --counts 3`
    prints steps k = 0..3 with exactly min(k, N) tokens masked; without --text it prints the split's metric per
    ratio, starting at the unmasked accuracy."""
    import re

    from engine.data import get_dataset
    from engine.models import save_classifier
    folder = save_classifier(toy_classifier, "cli-faith")
    assert main(["masf", "--model", "cli-faith"]) == 0
    out = capsys.readouterr().out
    assert "unmasked" in out and "100% masked" in out and list(folder.glob("masf-*.safetensors"))
    assert "calibrated on toy validation split" in out
    text = "a good film"
    assert main(["mask", "--model", "cli-faith", "--measure", "loo-sign", "--text", text, "--counts", "3"]) == 0
    out = capsys.readouterr().out
    steps = [line.split() for line in out.splitlines() if re.match(r"^\s+\d+\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+", line)]
    n_tokens = len(toy_classifier.tokenizer.tokenize(text))
    assert [int(row[0]) for row in steps] == [0, 1, 2, 3]
    assert [int(row[1]) for row in steps] == [min(k, n_tokens) for k in range(4)]
    assert steps[0][2] == steps[0][3], "nothing masked yet: the measure and the random baseline start together"
    area = re.search(r"ACU ([+-][0-9.]+), RACU", out)
    probability, random = [float(r[2]) for r in steps], [float(r[3]) for r in steps]
    expected = sum((random[k] - probability[k] + random[k + 1] - probability[k + 1]) / 2 / 3 for k in range(3))
    assert area and float(area.group(1)) == pytest.approx(expected, abs=2e-3), "ACU over x = k / k_max"
    assert main(["mask", "--model", "cli-faith", "--measure", "grad-l2", "--limit", "10", "--ratios", "0,0.5,1"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if re.match(r"^\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+%", line)]
    assert [row[1] for row in rows] == ["0.00", "0.50", "1.00"]
    dataset = get_dataset("toy")
    assert float(rows[0][2]) == pytest.approx(toy_classifier.evaluate(dataset, limit=10)["value"], abs=1e-4)


def test_benchmark_count_mode_masks_k_tokens_and_integrates_over_k_over_n(models_cache, toy_classifier, tmp_path,
                                                                           monkeypatch, capsys):
    """--counts N: rows carry k = 0..N as `count` and k / N as the x-axis `ratio` (so ACU stays a mean gap,
    not N times one), with schedule "count"; one seed prints no CI instead of a zero-width one."""
    from engine.faithfulness.benchmark import Cell
    from engine.models import save_classifier
    from engine.results import ResultsStore

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    save_classifier(toy_classifier, "cli-count-s0")
    argv = ["mask-sweep", "--model-template", "cli-count-s{seed}", "--datasets", "toy", "--measures", "random", "loo-sign",
            "--seeds", "0", "--limit", "12", "--counts", "3", "--run", "counts"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "recursive masking (count 0..3 tokens: x = k / k_max)" in out and "no CI: none: 1 value" in out
    rows = ResultsStore(tmp_path / "results").load("counts")
    assert set(rows["schedule"]) == {"count 0..3"}
    curve = rows[rows["measure"] == "random"].sort_values("step")
    assert list(curve["count"]) == [0, 1, 2, 3] and list(curve["ratio"]) == pytest.approx([0, 1 / 3, 2 / 3, 1])
    # A second schedule up to another k_max in the same run is its own group, never pooled (pooled, the two
    # random curves repeat every x and the area table could not be computed).
    assert main(argv[:-4] + ["--counts", "2", "--run", "counts"]) == 0
    out = capsys.readouterr().out
    assert "(count 0..2 tokens" in out and "(count 0..3 tokens" in out
    with pytest.raises(ValueError, match="reach at least 1"):
        Cell(model="m", dataset="toy", measure="random", seed=0, ratios=(), counts=(0,))


@pytest.mark.parametrize("command", [None, *(m.rsplit(".", 1)[-1] for m in
                                             __import__("engine.cli", fromlist=["COMMAND_MODULES"]).COMMAND_MODULES)])
def test_no_help_text_shows_a_doubled_percent_sign(command, capsys):
    """argparse %-formats argument help but prints a raw description as written: a "%%" meant for the one
    shows up doubled in the other ("top k%%"). No command's --help (nor the top level's) may print "%%"."""
    with pytest.raises(SystemExit):
        main([*([command] if command else []), "--help"])
    out = capsys.readouterr().out
    assert "%%" not in out, [line for line in out.splitlines() if "%%" in line]


def test_train_records_the_precision_asked_for(models_cache):
    """`train --precision bf16` trains under bfloat16 autocast and the checkpoint's metadata says so (the default,
    fp32, is what every shipped checkpoint used)."""
    from engine.models import load_classifier

    assert main(["train", "--model", "tiny", "--dataset", "toy", "--epochs", "1", "--train-limit", "32", "--eval-limit",
                 "16", "--quiet", "--id", "cli-bf16", "--precision", "bf16"]) == 0
    assert load_classifier("cli-bf16").metadata["precision"] == "bf16"

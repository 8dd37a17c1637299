"""`python -m engine COMMAND ...` (or the `faithfulness-engine` console script).

One mechanism: every command is a module in `engine/cli/` with `HELP` (its line in the command list),
`configure(parser)` (description, examples, arguments) and `run(args) -> int`. `COMMAND_MODULES` is the
list of them, in the order `--help` shows. Command modules import nothing heavy at module level and only
the chosen command is configured, so `--help` answers without loading torch.

Every error a user can cause is an `EngineError`: it ends in one line on stderr and exit code 2, with
nothing written. Anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import argparse
import shlex
import sys
from importlib import import_module

COMMAND_MODULES = (
    "engine.cli.train",
    "engine.cli.models",
    "engine.cli.datasets",
    "engine.cli.explain",
    "engine.cli.masf",
    "engine.cli.faithfulness",
    "engine.cli.benchmark",
    "engine.cli.evaluate",
    "engine.cli.sanity",
    "engine.cli.simulability",
    "engine.cli.roar",
    "engine.cli.attention",
    "engine.cli.annotations",
    "engine.cli.rationales",
    "engine.cli.study",
    "engine.cli.report",
    "engine.cli.self_explain",
    "engine.cli.plant",
    "engine.cli.report_card",
)

DESCRIPTION = """\
Faithfulness engine: fine-tune classifiers that support masking, and measure whether token-importance
explanations are true to the model. Settings (where models and results live, device, threads) are
environment variables listed in docs/configuration.md. Run `python -m engine COMMAND --help` for each command."""


def command_name(module_path: str) -> str:
    return module_path.rsplit(".", 1)[-1].replace("_", "-")  # engine.cli.self_explain -> self-explain


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The top-level parser. Only the command named in `argv` (if any) is configured in full."""
    # The console script names itself; `python -m engine` would otherwise show as "__main__.py".
    prog = "faithfulness-engine" if sys.argv[0].endswith("faithfulness-engine") else "python -m engine"
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in (argv or []) if not a.startswith("-")), None)
    for path in COMMAND_MODULES:
        module = import_module(path)
        name = command_name(path)
        command_parser = sub.add_parser(name, help=module.HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == chosen:
            module.configure(command_parser)
            command_parser.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    from engine.errors import Cancelled, EngineError
    from engine.settings import offline

    offline()  # the tool's policy for its entry points (never set by `import engine`)

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    # Provenance of everything this command stores: passed explicitly, never through the environment.
    args.command_line = "python -m engine " + shlex.join(argv)
    try:
        return args._run(args)
    except Cancelled:
        print("interrupted: nothing was saved", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted: nothing was saved", file=sys.stderr)
        return 130
    except EngineError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

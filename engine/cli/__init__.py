"""`python -m engine COMMAND ...` (or the `faithfulness-engine` console script).

One mechanism: every command is a module in `engine/cli/` with `HELP` (its line in the command list),
`configure(parser)` (description, examples, arguments) and `run(args) -> int`. `COMMAND_MODULES` is the
list of them, in the order `--help` shows. Command modules import nothing heavy at module level and only
the chosen command is configured, so `--help` answers without loading torch.

`ALIASES` maps a command's old name to its new one: an old name still runs its command until the release
`ALIASES_KEPT_UNTIL`, and says so in the command list, in its own `--help` and on stderr when it runs.

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
    "engine.cli.mask",
    "engine.cli.mask_sweep",
    "engine.cli.metrics",
    "engine.cli.sanity",
    "engine.cli.simulability",
    "engine.cli.roar",
    "engine.cli.attention",
    "engine.cli.annotations",
    "engine.cli.rationales",
    "engine.cli.study",
    "engine.cli.docs_tables",
    "engine.cli.self_explain",
    "engine.cli.plant",
    "engine.cli.report_card",
)

# Old name -> new name. The old names said where a command came from rather than what it does (`faithfulness` for
# the recursive masking of one text beside `report-card`, `report` for the docs' tables).
ALIASES = {
    "faithfulness": "mask",
    "benchmark": "mask-sweep",
    "evaluate": "metrics",
    "report": "docs-tables",
}
ALIASES_KEPT_UNTIL = "0.2.0"

DESCRIPTION = """\
Faithfulness engine: fine-tune classifiers that support masking, and measure whether token-importance
explanations are true to the model. Settings (where models and results live, device, threads) are
environment variables listed in docs/configuration.md. Run `python -m engine COMMAND --help` for each command."""


def command_name(module_path: str) -> str:
    return module_path.rsplit(".", 1)[-1].replace("_", "-")  # engine.cli.self_explain -> self-explain


def alias_note(old: str) -> str:
    """The line an old command name shows in the command list, atop its --help and on stderr when it runs."""
    return f"alias of {ALIASES[old]}, kept until {ALIASES_KEPT_UNTIL}"


def _renamed(old: str) -> str:
    return f"`{old}` is an {alias_note(old)}: use `python -m engine {ALIASES[old]}`"


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The top-level parser. Only the command named in `argv` (if any) is configured in full."""
    # The console script names itself; `python -m engine` would otherwise show as "__main__.py".
    prog = "faithfulness-engine" if sys.argv[0].endswith("faithfulness-engine") else "python -m engine"
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in (argv or []) if not a.startswith("-")), None)
    modules = {command_name(path): path for path in COMMAND_MODULES}
    # The old names after the commands, each its own entry so that the list says what it is an alias of.
    entries = [(name, name) for name in modules] + [(old, new) for old, new in ALIASES.items()]
    for name, command in entries:
        module = import_module(modules[command])
        help_line = module.HELP if name == command else alias_note(name)
        command_parser = sub.add_parser(name, help=help_line, formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == chosen:
            module.configure(command_parser)
            if name != command:
                command_parser.description = f"{_renamed(name)}.\n\n{command_parser.description or ''}"
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
    if args.command in ALIASES:
        print(f"note: {_renamed(args.command)}", file=sys.stderr)
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

"""Command line: `python -m engine <command> --help` explains each command."""
from __future__ import annotations

import sys

from engine.cli import main

if __name__ == "__main__":
    sys.exit(main())

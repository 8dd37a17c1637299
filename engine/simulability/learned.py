"""Moved to engine.importance.head_weights (the `smat` measure reads them without importing simulability;
docs/architecture.md#layers). Re-exported here for existing imports."""
from engine.importance.head_weights import (  # noqa: F401
    HEAD_WEIGHTS_FILE,
    head_weights_path,
    read_head_weights,
    should_replace,
    write_head_weights,
)

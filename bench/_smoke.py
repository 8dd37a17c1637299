"""The smoke-mode helpers of the bench entries, which import them from here; they live in `engine.smoke` (installed,
so scripts/ imports them without editing sys.path). Not an entry itself (the leading underscore)."""
from engine.smoke import SMOKE_HELP, smoke_checkpoint, use_scratch_folders  # noqa: F401

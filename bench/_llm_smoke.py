"""The prompted smoke classifier of the LLM benches; it lives in `engine.smoke`. Not an entry (leading underscore)."""
from engine.smoke import tiny_prompted  # noqa: F401

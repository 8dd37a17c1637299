"""Moved to engine.importance.head_scores (the `smat` measure reads them without importing simulability;
docs/architecture.md#layers). Re-exported here for existing imports."""
from engine.importance.head_scores import (  # noqa: F401
    _queries_keys,
    attention_logits,
    head_count,
    head_scores,
    head_weighted,
    masked_softmax,
    model_head_scores,
    self_attention_modules,
)

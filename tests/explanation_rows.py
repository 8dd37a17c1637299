"""Explanations computed in a test as a file of scores would hold them: the rows `evaluate --scores` and the
Benchmarks page's upload read back (tests/engine/test_imported_scores.py, tests/app/test_benchmark_views.py)."""
from __future__ import annotations


def loo_score_rows(classifier, limit: int) -> list[tuple]:
    """[(example, tokens of the whole input, offsets, maskable, loo-sign scores [T])] of the first `limit` toy test
    examples, the gold label explained (as `evaluate` does)."""
    from engine.data import get_dataset
    from engine.importance import get_explainer

    examples = get_dataset("toy", classifier.metadata.get("split_seed", 0)).split("test")[:limit]
    out = []
    for ex in examples:
        batch = classifier.batch_of([ex])
        imp = get_explainer("loo-sign", classifier, memo=False).attribute(batch, batch.target)
        n = int(batch.attention_mask[0].sum())
        tokens = classifier.tokenizer.convert_ids_to_tokens(batch.input_ids[0][:n].tolist())
        out.append((ex, tokens, batch.offsets[0][:n], batch.maskable[0][:n].tolist(), imp.scores[0][:n].tolist()))
    return out

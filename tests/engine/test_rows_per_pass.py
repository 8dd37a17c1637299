"""How many rows a CPU pass takes, and how many inputs recursive masking of a dataset puts in one batch: a small
model's forward passes grow past 4096 tokens to its activation budget (tiny peaks at 128 rows of 64 tokens), and a
dataset's batches are as large as one forward pass, so that neither the step's observation pass nor a single-pass
measure's gradient is held to 32 rows."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from engine.importance.batching import BatchedPasses


def _passes(hidden: int, layers: int, heads: int, inter: int) -> BatchedPasses:
    """A BatchedPasses over a described model on the CPU (nothing is allocated)."""
    cfg = SimpleNamespace(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=inter)
    classifier = SimpleNamespace(model=SimpleNamespace(config=cfg), device=torch.device("cpu"),
                                 embedding_matrix=torch.zeros(1, dtype=torch.float32))
    passes = BatchedPasses()
    passes.classifier, passes.memory_mb, passes.max_rows, passes.bf16 = classifier, None, None, False
    return passes


def test_a_small_models_forward_pass_takes_its_peaks_rows():
    """tiny (2 x 128, 2 heads) at T = 64: one layer's forward activations are 512 KiB a row, so a forward pass takes
    128 rows (64 MiB, where its throughput peaks), not the 64 rows of 4096 tokens; its forward+backward passes keep
    4096 tokens (64 rows). MiniLM (6 x 384, 12 heads) at 64 and 256 tokens keeps 4096 tokens a pass (64, 16 rows)."""
    tiny = _passes(128, 2, 2, 512)
    assert tiny.rows_per_pass(64, backward=False) == 128
    assert tiny.rows_per_pass(64, backward=True) == 64
    minilm = _passes(384, 6, 12, 1536)
    assert minilm.rows_per_pass(64, backward=False) == 64
    assert minilm.rows_per_pass(256, backward=False) == 16
    assert minilm.rows_per_pass(64, backward=True) == 64


def test_recursive_masking_batches_fill_one_forward_pass(toy_classifier):
    """Without a batch size, each batch of a dataset's recursive masking holds as many inputs as one forward pass of
    the model takes at that batch's padded length (all 40 short toy inputs at once for tiny, where fixed batches had
    32), in the length-sorted order; an explicit batch size is kept."""
    from engine.data import get_dataset
    from engine.faithfulness.recursive import masking_batches
    from engine.importance import get_explainer

    examples = get_dataset("toy").split("test")[:40]
    order = np.argsort([len(e.primary) for e in examples], kind="stable")
    explainer = get_explainer("grad-l2", toy_classifier, memo=False)
    batches = list(masking_batches(toy_classifier, explainer, examples, order))
    assert [len(idx) for idx, _ in batches] == [40]
    idx, batch = batches[0]
    assert idx.tolist() == order.tolist() and len(batch) == 40
    assert explainer.rows_per_pass(batch.input_ids.shape[1], backward=False) >= 40
    assert [len(idx) for idx, _ in masking_batches(toy_classifier, explainer, examples, order, 16)] == [16, 16, 8]

    few = get_explainer("grad-l2", toy_classifier, memo=False, max_rows=12)  # a pass of 12 rows: batches of 12
    sizes = [len(idx) for idx, _ in masking_batches(toy_classifier, few, examples, order)]
    assert sizes == [12, 12, 12, 4]

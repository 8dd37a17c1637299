"""A packaged LLM's conversion reports its progress in stages (engine.models.llm_package): the pages draw a real bar
from it (app/shared.convert_with_progress) instead of a spinner over a minute-long wait."""
from __future__ import annotations


def test_the_tensor_loop_reports_each_tensor_in_order_and_is_restored():
    """Within the block transformers' tensor loop tells `progress` each tensor's share (within the dequantising
    stage, 0.2 to 0.85 of the whole), in order, and yields every tensor; outside it the loop is transformers' own."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    from engine.models.llm_package import _tensor_progress

    original = gguf_utils.tqdm
    seen = []
    with _tensor_progress(lambda what, share: seen.append((what, share))):
        items = list(gguf_utils.tqdm(["a", "b", "c", "d"], desc="x", disable=True))
    assert items == ["a", "b", "c", "d"] and gguf_utils.tqdm is original
    shares = [s for _, s in seen]
    assert shares == sorted(shares) and shares[0] == 0.2 and abs(shares[-1] - 0.85) < 1e-12
    assert seen[0][0] == "dequantising tensor 1 of 4" and seen[-1][0] == "dequantised every tensor"
    with _tensor_progress(None):  # no callback: nothing is replaced
        assert gguf_utils.tqdm is original


def test_the_stages_cover_the_whole_bar_in_order():
    from engine.models import llm_package as p

    spans = [p._JOIN, p._READ, p._TENSORS, p._WRITE]
    assert spans[0][0] == 0.0 and spans[-1][1] == 1.0
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    seen = []
    p._stage(lambda w, s: seen.append(s), "x", p._TENSORS, 2.0)  # a share beyond 1 is clipped to its stage's end
    assert len(seen) == 1 and abs(seen[0] - 0.85) < 1e-12

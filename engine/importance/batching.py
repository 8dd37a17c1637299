"""How a measure's many rows (perturbed inputs, interpolation steps) go through the model: as few
forward or forward+backward passes as the memory budget allows, each trimmed of columns that are
padding in every row. Mixed into `Explainer`; measures call these instead of the model.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from engine.importance.types import Call
from engine.models import Batch

#: The share of the GPU's free memory one batched pass may plan for (the estimates below are rough, and the
#: caching allocator keeps blocks of earlier passes); an out-of-memory error halves the rows and retries.
CUDA_FREE_FRACTION = 0.5
#: The budget on a CPU (MiB), where throughput, not memory, sets the pass size.
CPU_BUDGET_MB = 1024
#: On a CPU a pass takes at least this many tokens (throughput rises up to a few thousand tokens a pass) ...
CPU_PASS_TOKENS = 4096
#: ... and a forward pass more, while one layer's transient activations stay within this many MiB: a small model's
#: throughput peaks at more tokens a pass than a larger one's (bench/importance.py; docs/methods.md#notes-behind-the-code).
CPU_FORWARD_ACTIVATION_MB = 64


def memory_budget_bytes(device: torch.device, memory_mb: float | None = None) -> int:
    """Bytes one batched pass may use: `memory_mb` when given; on CUDA a share (CUDA_FREE_FRACTION) of the
    memory free on that GPU now (`torch.cuda.mem_get_info`), on a CPU CPU_BUDGET_MB."""
    if memory_mb:
        return int(memory_mb * 2**20)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free * CUDA_FREE_FRACTION)
    return CPU_BUDGET_MB * 2**20


def activation_bytes(dtype: torch.dtype, bf16: bool) -> int:
    """Bytes of one activation element: 2 under bfloat16 autocast (matmul outputs are bf16 whatever the
    weights' dtype), else the size of the model's dtype."""
    return 2 if bf16 else torch.finfo(dtype).bits // 8


def row_bytes(classifier, T: int, backward: bool, bf16: bool = False, hidden_states: bool = False) -> int:
    """The memory model of one row of T tokens in a batched pass, in bytes (rough, from the model's config): a
    forward+backward keeps every layer's activations for the backward pass; a forward holds one layer's transient
    activations, plus (`hidden_states`) every layer's hidden state [T, H] when those are kept (the MaSF features).
    Elements are `activation_bytes` of the model's dtype. Every rows-per-pass of the engine divides a budget by it."""
    cfg = getattr(classifier.model, "config", None)
    H = int(getattr(cfg, "hidden_size", 256) or 256)
    L = int(getattr(cfg, "num_hidden_layers", 1) or 1)
    heads = int(getattr(cfg, "num_attention_heads", 1) or 1)
    inter = int(getattr(cfg, "intermediate_size", 4 * H) or 4 * H)
    elem = activation_bytes(classifier.embedding_matrix.dtype, bf16)
    if backward:  # activations kept for the backward pass, every layer
        return L * T * (10 * H + 2 * inter + 3 * heads * T) * elem
    kept = (L + 1) * H if hidden_states else 0  # the embedding output and each layer's output
    return T * (kept + 6 * H + 2 * inter + 2 * heads * T) * elem


def halve_after_oom(rows: int, error: BaseException, device: torch.device) -> int:
    """The rows per pass to retry with after `error` (a CUDA out-of-memory error): half, or the error again
    when one row already did not fit. Frees the allocator's cached blocks first."""
    if rows <= 1:
        raise error
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rows // 2


def explained(classifier, logits: torch.Tensor) -> torch.Tensor:
    """The per-class quantity [N, C] measures explain, from logits [N, C]: `Classifier.explained_logits` (the
    logits themselves, or a prompted LLM's class log-odds, docs/methods.md#prompted-language-models)."""
    return classifier.explained_logits(logits)


class BatchedPasses:
    """Chunked passes for an explainer with `classifier`, `memory_mb`, `max_rows`, `bf16` and `autocast()`."""

    def rows_per_pass(self, T: int, backward: bool) -> int:
        """How many rows of T tokens one forward (and backward) may take: within `memory_mb`; on a CPU, where
        throughput sets the size, CPU_PASS_TOKENS tokens a pass (IG's 50 steps of a 64-token input in one pass,
        as captum does: splitting them costs time, bench/importance.py), and a forward pass more rows while
        one layer's transient activations stay within CPU_FORWARD_ACTIVATION_MB (a small model's peak)."""
        per_row = row_bytes(self.classifier, T, backward, bool(getattr(self, "bf16", False)))
        cuda = self.classifier.device.type == "cuda"
        budget = memory_budget_bytes(self.classifier.device, self.memory_mb)
        if self.max_rows:
            cap = self.max_rows
        elif cuda:
            cap = 1024
        else:  # CPU throughput peaks at a few thousand tokens per pass and falls beyond (cache), see bench
            cap = max(1, CPU_PASS_TOKENS // T)
            if not backward:
                cap = max(cap, CPU_FORWARD_ACTIVATION_MB * 2**20 // max(per_row, 1))
        return int(max(1, min(cap, budget // max(per_row, 1))))

    def _chunked_logits(self, call: Call, n: int, T: int, chunk_logits: Callable[[slice, torch.Tensor], torch.Tensor],
                        device: torch.device) -> torch.Tensor:
        """Logits [n, C] (no gradient) computed chunk by chunk: `chunk_logits(rows slice, batch rows of that slice)`
        returns one chunk's logits; chunks are as large as the memory budget allows for T tokens."""
        b = call.batch
        out = []
        step = self.rows_per_pass(T, backward=False)
        start = 0
        with torch.no_grad():
            while start < n:
                call.check_stop()
                try:
                    with self.autocast():
                        logits = chunk_logits(slice(start, start + step), b)
                except torch.cuda.OutOfMemoryError as error:
                    step = halve_after_oom(step, error, device)
                    continue
                out.append(logits.float() if self.bf16 else logits)
                start += step
        return torch.cat(out) if out else torch.zeros(0, self.classifier.num_classes, device=device)

    def forward_logits(self, call: Call, input_ids: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Logits [N, C] (no gradient) of `input_ids` [N, T], row n using the attention/type ids of batch
        row `rows[n]`; chunked to the memory budget and trimmed of trailing padding per chunk."""
        def chunk(sl: slice, b: Batch) -> torch.Tensor:
            r = rows[sl]
            return explained(self.classifier, self.classifier.logits(*rows_batch(input_ids[sl], b.attention_mask[r],
                                                                                  b.token_type_ids[r])))

        return self._chunked_logits(call, input_ids.shape[0], input_ids.shape[1], chunk, input_ids.device)

    def embedding_logits(self, call: Call, embeds: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Logits [N, C] (no gradient) from word embeddings [N, T, H], row n with the attention/type ids of
        batch row `rows[n]`; chunked like `forward_logits`."""
        def chunk(sl: slice, b: Batch) -> torch.Tensor:
            r = rows[sl]
            L = int(b.attention_mask[r].sum(1).max())
            mini, _ = rows_batch(None, b.attention_mask[r][:, :L], b.token_type_ids[r][:, :L], trim=False)
            return explained(self.classifier, self.classifier.logits_from_embeddings(embeds[sl, :L], mini))

        return self._chunked_logits(call, embeds.shape[0], embeds.shape[1], chunk, embeds.device)

    def embedding_gradients(self, call: Call, n: int, make_embeds: Callable[[slice], torch.Tensor],
                            rows: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None,
                            on_rows: Callable[[int], None] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Sum over path rows of the gradient of weight[n] * logit_{target[n]} w.r.t. the word embeddings.

        n rows; `make_embeds(slice)` returns the word embeddings [m, T, H] of rows slice (built lazily so
        n x T x H never has to fit in memory at once); row n uses the attention/type ids of batch row
        `rows[n]` and its gradient is added to out[rows[n]]. Returns (out [B, T, H], logits [n, C]).
        Rows go through in as few forward+backward passes as the memory budget allows; `on_rows(done)` is called
        after each pass with the rows done so far (a UI's progress, and its chance to stop between passes)."""
        b = call.batch
        B, T = b.input_ids.shape
        out = None
        logits_all = []
        step = self.rows_per_pass(T, backward=True)
        start = 0
        while start < n:
            call.check_stop()
            sl = slice(start, min(start + step, n))
            r = rows[sl]
            L = int(b.attention_mask[r].sum(1).max())
            try:
                e = make_embeds(sl)[:, :L].detach().requires_grad_(True)
                with torch.enable_grad(), self.autocast():
                    logits = explained(self.classifier, self.classifier.logits_from_embeddings(
                        e, rows_batch(None, b.attention_mask[r][:, :L], b.token_type_ids[r][:, :L], trim=False)[0]))
                    logits = logits.float() if self.bf16 else logits
                    picked = logits.gather(1, target[sl, None]).squeeze(1)
                    if weight is not None:
                        picked = picked * weight[sl].to(picked.dtype)
                    (g,) = torch.autograd.grad(picked.sum(), e)
            except torch.cuda.OutOfMemoryError as error:  # nothing of this pass was added yet: retry it smaller
                step = halve_after_oom(step, error, b.input_ids.device)
                continue
            start = sl.stop
            if out is None:
                out = torch.zeros(B, T, g.shape[-1], dtype=g.dtype, device=g.device)
            out[:, :L].index_add_(0, r, g)
            logits_all.append(logits.detach())
            if on_rows is not None:
                on_rows(sl.stop)
        return out, torch.cat(logits_all)


def rows_batch(input_ids: torch.Tensor | None, attention_mask: torch.Tensor, token_type_ids: torch.Tensor,
                trim: bool = True) -> tuple[Batch, torch.Tensor | None]:
    """A minimal `Batch` for `Classifier.logits` (which reads ids, attention and type ids only), with the
    trailing columns that are padding in every row cut off (right padding: results are unchanged)."""
    if trim:
        L = int(attention_mask.sum(1).max())
        attention_mask, token_type_ids = attention_mask[:, :L], token_type_ids[:, :L]
        input_ids = None if input_ids is None else input_ids[:, :L]
    ids = input_ids if input_ids is not None else torch.zeros_like(attention_mask)
    n = attention_mask.shape[0]
    blank = torch.zeros_like(attention_mask)
    batch = Batch(input_ids=ids, attention_mask=attention_mask, token_type_ids=token_type_ids, segments=blank,
                  maskable=blank.bool(), target=None, truncated=torch.zeros(n, dtype=torch.bool), offsets=[])
    return batch, ids

"""The one `Batch` type that crosses every boundary, and the one function that makes it from text.

No page and no measure tokenises text on its own: they all call `tokenize`.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import torch

from engine.errors import EmptyInputError, InvalidInputError  # noqa: F401 (re-exported)

# Segment codes in `Batch.segments`.
SPECIAL, PRIMARY, AUXILIARY = 0, 1, 2


@dataclass
class Batch:
    """A tokenised, padded batch. B = batch size, T = padded length (tokens).

    input_ids [B, T] long; attention_mask [B, T] long (1 = real token, 0 = padding);
    token_type_ids [B, T] long; segments [B, T] long (0 special/pad, 1 primary, 2 auxiliary);
    maskable [B, T] bool: the primary sequence's non-special tokens, the only ones that are masked
        and explained (docs/methods.md conventions);
    target [B] long or None: the class to explain / the gold label;
    truncated [B] bool: the primary text was cut to fit `max_length`;
    offsets [B][T] (start, end) character offsets into the primary text ((0, 0) for others).
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor
    segments: torch.Tensor
    maskable: torch.Tensor
    target: torch.Tensor | None
    truncated: torch.Tensor
    offsets: list[list[tuple[int, int]]]

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def device(self) -> torch.device:
        return self.input_ids.device

    def to(self, device: torch.device | str) -> Batch:
        return replace(
            self,
            **{
                f.name: getattr(self, f.name).to(device)
                for f in fields(self)
                if isinstance(getattr(self, f.name), torch.Tensor)
            },
        )

    def with_ids(self, input_ids: torch.Tensor) -> Batch:
        """The same batch with other token ids (e.g. some replaced by [MASK])."""
        if input_ids.shape != self.input_ids.shape:
            raise InvalidInputError(f"ids shape {tuple(input_ids.shape)} != batch shape {tuple(self.input_ids.shape)}")
        return replace(self, input_ids=input_ids)

    def with_target(self, target: torch.Tensor | Sequence[int]) -> Batch:
        return replace(self, target=torch.as_tensor(target, dtype=torch.long, device=self.device))

    def select(self, index: Sequence[int] | torch.Tensor) -> Batch:
        """Rows `index` of the batch (still padded to T)."""
        idx = torch.as_tensor(index, dtype=torch.long)
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor):
                out[f.name] = value[idx.to(value.device)]
            elif value is None:
                out[f.name] = None
            else:
                out[f.name] = [value[i] for i in idx.tolist()]
        return Batch(**out)

    def repeat_rows(self, n: int) -> Batch:
        """Each row repeated n times consecutively: [B, T] -> [B*n, T]."""
        return self.select(torch.arange(len(self)).repeat_interleave(n))


def tokenize(
    tokenizer,
    primary: Sequence[str] | str,
    auxiliary: Sequence[str | None] | str | None = None,
    target: Sequence[int] | int | None = None,
    max_length: int = 128,
) -> Batch:
    """Tokenise single or paired inputs into a `Batch`.

    Truncation cuts only the primary sequence (the question of a paired task is kept whole) and is
    flagged per row in `Batch.truncated`, never silent. Raises EmptyInputError for empty text or
    text that tokenises to nothing.
    """
    if isinstance(primary, str):
        primary = [primary]
        auxiliary = [auxiliary] if isinstance(auxiliary, str) or auxiliary is None else auxiliary
        target = [target] if isinstance(target, int) else target
    primary = list(primary)
    if not primary:
        raise EmptyInputError("no input text given")
    if auxiliary is None:
        auxiliary = [None] * len(primary)
    auxiliary = list(auxiliary)
    if len(auxiliary) != len(primary):
        raise InvalidInputError(f"{len(primary)} primary texts but {len(auxiliary)} auxiliary texts")
    paired = [a is not None for a in auxiliary]
    if any(paired) and not all(paired):
        raise InvalidInputError("either every input has an auxiliary sequence or none has")
    for i, text in enumerate(primary):
        if not isinstance(text, str) or not text.strip():
            raise EmptyInputError(f"input {i} is empty: type some text to classify")
    if max_length < 4:
        raise InvalidInputError(f"max_length must be at least 4 tokens, got {max_length}")

    common = dict(return_offsets_mapping=True, return_token_type_ids=True, return_attention_mask=True)
    if all(paired):
        enc = tokenizer(primary, auxiliary, truncation="only_first", max_length=max_length, **common)
        full = tokenizer(primary, auxiliary, truncation=False, **common)
    else:
        enc = tokenizer(primary, truncation=True, max_length=max_length, **common)
        full = tokenizer(primary, truncation=False, **common)

    rows, truncated, offsets = [], [], []
    for i in range(len(primary)):
        seq_ids = enc.sequence_ids(i)
        n_primary = sum(1 for s in seq_ids if s == 0)
        if n_primary == 0:
            raise EmptyInputError(f"input {i} has no tokens left after tokenisation (only spaces or control characters?)")
        rows.append(seq_ids)
        truncated.append(len(full["input_ids"][i]) > len(enc["input_ids"][i]))
        offsets.append(
            [tuple(o) if s == 0 else (0, 0) for o, s in zip(enc["offset_mapping"][i], seq_ids)]
        )

    T = max(len(ids) for ids in enc["input_ids"])
    B = len(primary)
    pad = tokenizer.pad_token_id
    input_ids = torch.full((B, T), pad, dtype=torch.long)
    attention = torch.zeros((B, T), dtype=torch.long)
    token_types = torch.zeros((B, T), dtype=torch.long)
    segments = torch.zeros((B, T), dtype=torch.long)
    for i, seq_ids in enumerate(rows):
        n = len(seq_ids)
        input_ids[i, :n] = torch.tensor(enc["input_ids"][i])
        attention[i, :n] = 1
        token_types[i, :n] = torch.tensor(enc["token_type_ids"][i])
        segments[i, :n] = torch.tensor([0 if s is None else (PRIMARY if s == 0 else AUXILIARY) for s in seq_ids])
        offsets[i] = offsets[i] + [(0, 0)] * (T - n)
    if target is not None:
        target = torch.as_tensor(list(target), dtype=torch.long)
        if target.shape != (B,):
            raise InvalidInputError(f"{B} inputs but {target.numel()} targets")
    return Batch(
        input_ids=input_ids,
        attention_mask=attention,
        token_type_ids=token_types,
        segments=segments,
        maskable=segments == PRIMARY,
        target=target,
        truncated=torch.tensor(truncated, dtype=torch.bool),
        offsets=offsets,
    )


def collate_examples(tokenizer, examples, max_length: int) -> Batch:
    """A `Batch` of dataset `Example`s with their gold labels as target."""
    paired = examples[0].auxiliary is not None
    return tokenize(
        tokenizer,
        [e.primary for e in examples],
        [e.auxiliary for e in examples] if paired else None,
        [e.label for e in examples],
        max_length=max_length,
    )

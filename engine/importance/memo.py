"""Memoising explanations per (model, input, target, measure, options) in a small LRU.

The dashboard explains the same input again whenever a widget changes, and several measures share
one expensive quantity (grad-l2, grad-l1 and x-grad share one gradient; ig-sign and ig-abs one path
integral; loo-sign and loo-abs one batch of masked copies). Both the final scores and those shared
quantities go through the memo of the model that computed them.

One LRU per model object (at most 128 entries and 256 MiB of tensors), held in a `WeakKeyDictionary`, so a memo dies with its model and two
unsaved models (both with id 'unsaved') never share entries. The key includes the sum of the
parameters' in-place version counters, so training the model in place invalidates its entries.
"""
from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import torch

from engine.errors import InvalidInputError

DEFAULT_MAXSIZE = 128
DEFAULT_MAX_BYTES = 256 * 2**20


def nbytes(value: Any) -> int:
    """Bytes held by the tensors in a (nested) value; other objects count a little."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        return sum(nbytes(v) for v in value.values()) + 64
    if isinstance(value, (list, tuple)):
        return sum(nbytes(v) for v in value) + 64
    if hasattr(value, "__dataclass_fields__"):
        return sum(nbytes(getattr(value, f)) for f in value.__dataclass_fields__) + 64
    return 64


class LRU:
    """A thread-safe least-recently-used map with at most `maxsize` entries and `max_bytes` of tensors
    (a value larger than `max_bytes` is not stored)."""

    def __init__(self, maxsize: int = DEFAULT_MAXSIZE, max_bytes: int = DEFAULT_MAX_BYTES):
        if maxsize < 0:
            raise InvalidInputError(f"maxsize must be >= 0, got {maxsize}")
        self.maxsize = int(maxsize)
        self.max_bytes = int(max_bytes)
        self.bytes = 0
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._sizes: dict[Hashable, int] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                self.hits += 1
                return self._data[key]
            self.misses += 1
            return default

    def put(self, key: Hashable, value: Any) -> None:
        size = nbytes(value)
        if self.maxsize == 0 or size > self.max_bytes:
            return
        with self._lock:
            if key in self._data:
                self.bytes -= self._sizes[key]
            self._data[key] = value
            self._sizes[key] = size
            self.bytes += size
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize or self.bytes > self.max_bytes:
                old, _ = self._data.popitem(last=False)
                self.bytes -= self._sizes.pop(old)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._sizes.clear()
            self.bytes = 0
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data


_memos: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_memos_lock = threading.Lock()


def memo_for(model: torch.nn.Module) -> LRU:
    """The LRU of `model` (created on first use)."""
    with _memos_lock:
        memo = _memos.get(model)
        if memo is None:
            memo = _memos[model] = LRU()
        return memo


def clear_memo(model: torch.nn.Module | None = None) -> None:
    """Forget memoised explanations of one model, or of every model."""
    with _memos_lock:
        targets = [model] if model is not None else list(_memos.keys())
        for m in targets:
            if m in _memos:
                _memos[m].clear()


def weights_version(model: torch.nn.Module) -> int:
    """Changes whenever a parameter is modified in place (optimiser steps, load_state_dict)."""
    return sum(p._version for p in model.parameters())


def tensor_digest(*tensors: torch.Tensor | None) -> str:
    """A content hash of tensors (shape, dtype and values)."""
    h = hashlib.blake2b(digest_size=16)
    for t in tensors:
        if t is None:
            h.update(b"none|")
            continue
        t = t.detach()
        h.update(f"{tuple(t.shape)}|{t.dtype}|".encode())
        h.update(t.cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def freeze(value: Any) -> Hashable:
    """A hashable, order-independent form of an options dict (nested dicts/lists allowed)."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, torch.Tensor):
        return tensor_digest(value)
    return value


def memoised(model: torch.nn.Module, key: Hashable, compute: Callable[[], Any], enabled: bool = True) -> Any:
    """`compute()` once per key for this model (while its weights stay the same)."""
    if not enabled:
        return compute()
    memo = memo_for(model)
    full_key = (weights_version(model), key)
    value = memo.get(full_key, _MISSING)
    if value is _MISSING:
        value = compute()
        memo.put(full_key, value)
    return value


_MISSING = object()

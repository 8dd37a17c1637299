"""Every load of pretrained transformer weights goes through `load_pretrained`: safetensors only, the dtype
and the attention kernel chosen by two pure functions, and what was chosen returned for provenance.

- Weights: a local folder must hold `model.safetensors` or shards named by `model.safetensors.index.json`;
  a folder with pickled weights only (`pytorch_model.bin`, ...) is refused with the command that converts it,
  before transformers sees it, and `use_safetensors=True` keeps transformers from falling back to a pickle
  (a hub id without safetensors is refused by transformers itself).
- dtype (`choose_dtype`): float32 unless asked otherwise. A checkpoint saved in float16/bfloat16 is upcast on
  every device, because LOO, beam search, erasure curves and MaSF compare small differences of logits and
  hidden states; `ENGINE_DTYPE` (or `dtype=`) may ask for 'stored', 'bfloat16' or 'float16' (GPU only).
- attention (`choose_attention`): PyTorch's fused scaled-dot-product attention (SDPA) where the architecture
  has it and can switch back at run time, else eager. Only forwards that return attention weights need eager
  (`Classifier.forward(output_attentions=True)` switches for that call); SDPA gives the same logits and
  gradients up to float rounding (about 1e-7 on `tiny`, tests/engine/test_model_loading.py). Models that need double
  backward (the simulability student) ask for eager.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import torch

from engine.errors import CheckpointError, InvalidInputError
from engine.models.weights import weight_files

HALF_DTYPES = (torch.float16, torch.bfloat16)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DTYPE_CHOICES = ("auto", "stored", *DTYPES)
ATTENTION_CHOICES = ("auto", "sdpa", "eager")
#: safetensors' dtype codes of floating tensors
_SAFETENSORS_FLOATS = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def dtype_name(dtype: torch.dtype | None) -> str | None:
    return None if dtype is None else str(dtype).removeprefix("torch.")


def choose_dtype(device_type: str, stored: torch.dtype | None, requested: str | None = None) -> tuple[torch.dtype, str]:
    """(the dtype to run a model in, why) from the device type ('cpu', 'cuda'), the dtype its weights are stored in
    (None: unknown) and the request ('auto' or None, 'stored', 'float32', 'bfloat16', 'float16').

    'auto' runs float32 whatever is stored: half-precision weights are upcast (exactly: every float16 and
    bfloat16 value is a float32 value), so measures never run in half precision unless asked. float16 is
    refused on the CPU (slow kernels, and gradients that underflow); bfloat16 is allowed everywhere."""
    requested = (requested or "auto").lower()
    if requested not in DTYPE_CHOICES:
        raise InvalidInputError(f"unknown dtype {requested!r}: use one of {', '.join(DTYPE_CHOICES)}")
    stored_name = dtype_name(stored) or "unknown"
    if requested == "auto":
        if stored in HALF_DTYPES:
            return torch.float32, f"stored in {stored_name}, upcast to float32 (ask for ENGINE_DTYPE=stored to keep it)"
        return torch.float32, f"stored in {stored_name}, run in float32"
    chosen = (stored if stored in (*HALF_DTYPES, torch.float32) else torch.float32) if requested == "stored" else DTYPES[requested]
    if chosen == torch.float16 and device_type == "cpu":
        raise InvalidInputError("float16 was asked for on the CPU, whose float16 kernels are slow and whose gradients "
                                "underflow: use bfloat16 or float32 there (ENGINE_DTYPE=bfloat16 or auto)")
    return chosen, f"stored in {stored_name}, {dtype_name(chosen)} as asked ({requested})"


def choose_attention(supports_sdpa: bool, switchable: bool, requested: str | None = None,
                     need_weights: bool = False) -> tuple[str, str]:
    """(attn_implementation, why) from what the architecture offers: `supports_sdpa` (it has an SDPA path),
    `switchable` (its attention can be set back to eager at run time, which the attention measures need),
    the request ('auto' or None, 'sdpa', 'eager') and `need_weights` (the model's every use needs eager:
    attention weights, or double backward, which the fused kernels lack)."""
    requested = (requested or "auto").lower()
    if requested not in ATTENTION_CHOICES:
        raise InvalidInputError(f"unknown attention {requested!r}: use one of {', '.join(ATTENTION_CHOICES)}")
    if need_weights:
        if requested == "sdpa":
            raise InvalidInputError("this model needs eager attention (attention weights or double backward); sdpa was asked for")
        return "eager", "eager: this use needs attention weights or double backward"
    if requested == "eager":
        return "eager", "eager as asked"
    if requested == "sdpa":
        if not supports_sdpa:
            raise InvalidInputError("sdpa was asked for but this architecture has no SDPA attention: use auto or eager")
        return "sdpa", "sdpa as asked"
    if not supports_sdpa:
        return "eager", "eager: this architecture has no SDPA attention"
    if not switchable:
        return "eager", "eager: this architecture cannot switch attention at run time, and attention measures need eager"
    return "sdpa", "sdpa; forwards that return attention weights switch to eager"


def check_weights(source: str | os.PathLike) -> list[Path] | None:
    """The safetensors files of a local model folder; raises CheckpointError for a folder whose weights are only
    pickled (with the conversion command) or missing. None for a hub id (transformers, told
    use_safetensors=True, refuses a repository without safetensors)."""
    path = Path(source).expanduser()
    if not path.is_dir():
        return None
    return weight_files(path)


def stored_dtype(files: list[Path] | None) -> torch.dtype | None:
    """The floating dtype most of a checkpoint's tensors are stored in, from the safetensors headers (no tensor is
    read); None when unknown."""
    if not files:
        return None
    counts: Counter = Counter()
    for path in files:
        try:
            with open(path, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                if not 0 < size < 100_000_000:
                    return None
                header = json.loads(f.read(size))
        except (OSError, ValueError):
            return None
        for key, entry in header.items():
            if key != "__metadata__" and isinstance(entry, dict) and entry.get("dtype") in _SAFETENSORS_FLOATS:
                counts[_SAFETENSORS_FLOATS[entry["dtype"]]] += 1
    return counts.most_common(1)[0][0] if counts else None


def _model_class(auto_class, config):
    """The concrete transformers class `auto_class` would build for `config`, or None when it cannot tell."""
    try:
        from transformers.models.auto.auto_factory import _get_model_class

        return _get_model_class(config, auto_class._model_mapping)
    except (KeyError, AttributeError, ImportError, ValueError):
        return None


def load_pretrained(auto_class, source: str | os.PathLike, *, device: str | torch.device = "cpu", dtype: str | None = None,
                    attention: str | None = None, need_weights: bool = False, files: list[Path] | None = None, **kwargs):
    """`auto_class.from_pretrained(source, **kwargs)` the one safe way: safetensors only, dtype and attention chosen
    above (dtype and attention default to the settings ENGINE_DTYPE and ENGINE_ATTENTION).

    files: the folder's safetensors files when the caller listed them already (`weight_files`), else listed here.

    Returns (what from_pretrained returns, runtime): runtime = {'dtype', 'stored_dtype', 'dtype_reason',
    'attn_implementation', 'attn_reason'} for provenance. Raises CheckpointError for pickled-only folders."""
    from transformers import AutoConfig

    import engine.settings as settings

    files = files if files is not None else check_weights(source)
    device_type = torch.device(device).type
    try:
        config = AutoConfig.from_pretrained(str(source))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"{source} has no usable config.json ({type(err).__name__}: {err})") from None
    cls = _model_class(auto_class, config)
    supports = bool(getattr(cls, "_supports_sdpa", False))
    switchable = bool(cls is not None and cls._can_set_attn_implementation()) if supports else False
    impl, attn_reason = choose_attention(supports, switchable, attention or settings.attention_request(), need_weights)
    stored = stored_dtype(files) or (getattr(config, "dtype", None) if isinstance(getattr(config, "dtype", None), torch.dtype) else None)
    chosen, dtype_reason = choose_dtype(device_type, stored, dtype or settings.dtype_request())
    loaded = auto_class.from_pretrained(str(source), use_safetensors=True, attn_implementation=impl, dtype=chosen, **kwargs)
    runtime = {"dtype": dtype_name(chosen), "stored_dtype": dtype_name(stored), "dtype_reason": dtype_reason,
               "attn_implementation": impl, "attn_reason": attn_reason}
    return loaded, runtime

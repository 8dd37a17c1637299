"""Loading a LoRA adapter folder onto a prompted classifier, from safetensors only. Its own module (re-exported by
`lora_training`) so that what loads a shipped adapter (`builtin_llms`, used by the registry) needs none of the
training code, whose imports would close a cycle through the checkpoint loader."""
from __future__ import annotations

import os
from pathlib import Path

from engine.errors import CheckpointError

ADAPTER_DIR = "adapter"


def load_adapter(base, folder: str | os.PathLike):
    """Apply the adapter saved in `<folder>/adapter` to a prompted classifier `base` (its LM is changed in place);
    returns the `PeftModel`. Reads only adapter_model.safetensors."""
    from peft import PeftModel

    adapter = Path(folder) / ADAPTER_DIR
    # peft falls back to unpickling adapter_model.bin when no safetensors file is there: refuse before it can.
    if not (adapter / "adapter_model.safetensors").is_file():
        raise CheckpointError(f"{adapter} has no adapter_model.safetensors; adapters are loaded from safetensors only "
                              "(a pickled adapter_model.bin is never read: convert it with peft's save_pretrained("
                              "safe_serialization=True) in an environment you trust)")
    return PeftModel.from_pretrained(base.model, str(adapter))  # peft reads the safetensors file when it is there

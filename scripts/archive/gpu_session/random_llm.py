"""A packaged LLM's converted folder with RANDOM weights of the real config and the real tokenizer and chat
template (the weights are too large to carry to the device): for timing and for CUDA-vs-CPU agreement only."""
import json
import lzma
import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

src, dest = Path(sys.argv[1]), Path(sys.argv[2])
if (dest / "model.safetensors").is_file():
    sys.exit(0)
dest.mkdir(parents=True, exist_ok=True)
for f in src.iterdir():
    if f.name.endswith(".xz"):
        (dest / f.name[:-3]).write_bytes(lzma.decompress(f.read_bytes()))
    else:
        shutil.copy(f, dest / f.name)
torch.manual_seed(0)
config = AutoConfig.from_pretrained(dest)
model = AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
model.save_pretrained(dest)
(dest / "provenance.json").write_text(json.dumps({"source": "random weights (seed 0) of the packaged model's config, "
    "real tokenizer: timing and CUDA-vs-CPU agreement only", "stored_dtype": "bfloat16"}), encoding="utf-8")
print(f"{dest.name}: random weights, {sum(p.numel() for p in model.parameters())/1e6:.1f}M parameters")

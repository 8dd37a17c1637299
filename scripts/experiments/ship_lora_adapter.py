"""Ship a masked-LoRA run as a built-in id (engine/models/builtin_llms.py): copy its adapter (LoRA weights only,
safetensors) into engine/models/builtin/<id>/adapter/, write training.json (the run's metadata and command),
results/llm/<id>.json (the same with this step's provenance, for the docs' tables) and reference_logits.json (the
built-in id's class log-probabilities on a few fixed sentences, which tests/engine/test_gemma.py compares against).

Before writing the reference it checks that the built-in id (fresh base + shipped adapter, merged) gives the same
logits as the trained folder's merged model, within 1e-4.

    python scripts/experiments/ship_lora_adapter.py --trained models_cache/gemma3-rt-lora --id gemma3-rt-lora \
        --command "python -m engine train --from-classifier gemma3-rt-prompt ..."
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

REFERENCE_TEXTS = ["a gripping , funny film , but far too long", "the plot is thin and the jokes fall flat .",
                   "an utterly charming and moving portrait of a family ."]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trained", help="the folder `train --lora` saved (holds adapter/ and metadata.json)")
    parser.add_argument("--id", help="the built-in id it becomes, e.g. smollm2-rt-lora")
    parser.add_argument("--command", help="the training command, recorded with the adapter")
    parser.add_argument("--smoke", action="store_true", help="CI smoke mode: check what this script shipped (every "
                        "built-in adapter folder: safetensors and JSON only, no base path, its reference logits over "
                        "REFERENCE_TEXTS) without loading a language model")
    args = parser.parse_args(argv)
    if args.smoke:
        return check_shipped()
    if not (args.trained and args.id and args.command):
        parser.error("--trained, --id and --command are required")

    import torch

    from engine.atomic import write_text
    from engine.models.builtin_llms import BUILTINS
    from engine.models.lora_training import ADAPTER_DIR, load_lora_folder
    from engine.models.registry import load_registered
    from engine.sweeps import provenance

    started = time.time()
    trained = Path(args.trained)
    builtin = BUILTINS[args.id]
    metadata = json.loads((trained / "metadata.json").read_text(encoding="utf-8"))
    target = builtin.adapter_dir
    if (target / ADAPTER_DIR).exists():  # the licence files beside it (Gemma's NOTICE, terms) stay
        shutil.rmtree(target / ADAPTER_DIR)
    (target / ADAPTER_DIR).mkdir(parents=True)
    for item in (trained / ADAPTER_DIR).iterdir():
        if item.suffix in (".safetensors", ".json"):  # never a pickle; README.md from peft is not needed
            shutil.copy2(item, target / ADAPTER_DIR / item.name)
    # The local folders of the training machine mean nothing elsewhere: provenance names the packaged LLM instead,
    # and peft's config names no base (it would compare it with the loaded model's path and warn).
    for name, key, value in (("adapter_config.json", "base_model_name_or_path", None),
                             ("provenance.json", "base_folder", builtin.llm)):
        path = target / ADAPTER_DIR / name
        data = json.loads(path.read_text(encoding="utf-8"))
        data[key] = value
        write_text(path, json.dumps(data, indent=2) + "\n")
    keep = {k: v for k, v in metadata.items() if k not in ("folder", "adapter", "artifacts_dir", "base_model_source")}
    keep["from_classifier"] = {k: v for k, v in keep.get("from_classifier", {}).items() if k not in ("folder", "base_model_source")}
    keep["command"] = args.command
    write_text(target / "training.json", json.dumps(keep, indent=2) + "\n")

    shipped = load_registered(args.id)  # the built-in (base + shipped adapter), not a models_cache folder of that id
    merged = load_lora_folder(trained)
    with torch.no_grad():
        got = shipped.logits(shipped.batch(REFERENCE_TEXTS))
        want = merged.logits(merged.batch(REFERENCE_TEXTS))
    gap = float((got - want).abs().max())
    if gap > 1e-4:
        print(f"the shipped adapter does not reproduce the trained model: max |logit gap| {gap:.2e}", file=sys.stderr)
        return 1
    write_text(target / "reference_logits.json", json.dumps({
        "texts": REFERENCE_TEXTS, "logits": got.tolist(), "classes": list(shipped.classes),
        "max_gap_to_trained_merged_model": gap, "weights_sha256": shipped.metadata["weights_sha256"],
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=2) + "\n")
    command = "python scripts/experiments/ship_lora_adapter.py " + " ".join(argv if argv is not None else sys.argv[1:])
    record = {**keep, "adapter_bytes": (target / ADAPTER_DIR / "adapter_model.safetensors").stat().st_size,
              "shipped": provenance(command, started, checkpoint_sha256=shipped.metadata["weights_sha256"])}
    write_text(Path("results/llm") / f"{args.id}.json", json.dumps(record, indent=2) + "\n")
    print(f"shipped {target} ({record['adapter_bytes']:,} bytes); logits reproduce the trained model within {gap:.1e}")
    return 0


def check_shipped() -> int:
    """The invariants this script writes, checked on every shipped built-in adapter (0 when all hold)."""
    from engine.models.builtin_llms import BUILTINS
    from engine.models.lora_training import ADAPTER_DIR

    shipped = [(name, b) for name, b in BUILTINS.items() if getattr(b, "adapter_dir", None) is not None]
    assert shipped, "no built-in adapter"
    for name, builtin in shipped:
        folder = builtin.adapter_dir / ADAPTER_DIR
        files = sorted(p.name for p in folder.iterdir())
        assert files and all(f.endswith((".safetensors", ".json")) for f in files), (name, files)
        config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
        assert config.get("base_model_name_or_path") is None, (name, config.get("base_model_name_or_path"))
        reference = json.loads((builtin.adapter_dir / "reference_logits.json").read_text(encoding="utf-8"))
        assert reference["texts"] == REFERENCE_TEXTS and len(reference["logits"]) == len(REFERENCE_TEXTS), name
        print(f"{name}: {', '.join(files)}; reference logits over {len(REFERENCE_TEXTS)} texts")
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    raise SystemExit(main())

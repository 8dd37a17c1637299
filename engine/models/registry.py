"""Registered models: the user's own classifier folders, recorded by reference.

A registration is one small JSON manifest, `<user dir>/models/<id>.json` (`ENGINE_USER_DIR`, git-ignored),
naming the folder and the options it is loaded with (tokenizer, replacement token, max length, whether it
was masked-fine-tuned). The folder itself is never copied unless asked (`copy=True`: safetensors, config and
tokenizer files only), and never written to: files fitted for the model (MaSF) go to `<user dir>/models/<id>/`.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import engine.settings as settings
from engine.atomic import recover_folder, replacing_folder, write_text
from engine.errors import CheckpointError, InvalidInputError, UnknownModelError
from engine.models import llm_package
from engine.models.builtin_llms import BUILTINS, apply_shipped_adapter
from engine.models.ids import check_model_id
from engine.models.kinds import ModelKind, kind_of
from engine.models.llm_package import converted_dir
from engine.models.prompt_spec import PromptSpec

#: files a copy keeps: weights as safetensors, configuration and tokenizer; never a pickle
_COPIED_SUFFIXES = (".safetensors", ".json", ".txt", ".model", ".tiktoken", ".jinja")


def registry_dir() -> Path:
    return settings.user_dir() / "models"


def manifest_path(model_id: str) -> Path:
    return registry_dir() / f"{check_model_id(model_id)}.json"


def artifacts_dir(model_id: str) -> Path:
    """Where files fitted for a registered model (MaSF) are kept."""
    return registry_dir() / model_id


def read_manifest(model_id: str) -> dict | None:
    """The manifest of a registered id, or None when the id is not registered."""
    path = manifest_path(model_id)
    if not path.is_file():
        return builtin_manifest(model_id)
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"the registration {path} is corrupt ({err}); remove it with "
                              f"`python -m engine models remove {model_id}` and add the folder again") from None
    if not isinstance(manifest, dict) or "path" not in manifest:
        raise CheckpointError(f"the registration {path} names no folder; remove it and add the folder again")
    return manifest


# -- prompted language models (engine.models.prompted) ------------------------------------------------
#: ids registered by the project itself (engine.models.builtin_llms): a packaged LLM with a prompt, and for the
#: masked-LoRA ids an adapter shipped in the repository; usable as soon as the LLM's package is installed
BUILTIN_PROMPTED = {model_id: (b.llm, b.label) for model_id, b in BUILTINS.items()}


def builtin_manifest(model_id: str) -> dict | None:
    """The manifest of a built-in prompted id (its folder is converted from the package on first load), else None.
    A masked-LoRA id whose adapter is not in the checkout is not built in."""
    builtin = BUILTINS.get(model_id)
    if builtin is None or not builtin.shipped:
        return None
    return {"id": model_id, "path": str(converted_dir(builtin.llm)), "packaged_llm": builtin.llm,
            "prompt": builtin.prompt().to_dict(), "builtin": True, "max_length": None,
            "adapter": str(builtin.adapter_dir) if builtin.adapter else None,
            "masked_fine_tuned": builtin.adapter is not None, "label": builtin.label}


def builtin_prompted() -> list[dict]:
    """Every built-in prompted id as a listing row, masked-LoRA ids first, without converting or loading its LLM
    (listing stays fast): the manifest plus `description`, `classes`, `replacement_token` (what masking writes),
    `installed` (its package is on disk) and `converted` (the safetensors folder exists; else it is converted on
    first load)."""
    rows = []
    for model_id in BUILTINS:
        manifest = builtin_manifest(model_id)
        if manifest is None:
            continue
        key = manifest["packaged_llm"]
        spec = PromptSpec.from_dict(manifest["prompt"])
        llm = llm_package.packaged(key)
        try:
            llm_package.package_files(key)  # finds the package's files; reads nothing
            installed = True
        except UnknownModelError:
            installed = False
        folder = Path(manifest["path"])
        rows.append(dict(manifest, description=llm.description, classes=list(spec.classes),
                         package=" ".join(llm.distributions), licence=llm.licence,
                         replacement_token=spec.replacement_text if spec.replacement == "redacted" else spec.replacement,
                         installed=installed,
                         converted=(folder / "model.safetensors").is_file() and (folder / "config.json").is_file()))
    return rows


def _load_prompted_manifest(manifest: dict, device: str | None, dtype: str | None = None):
    from engine.models.prompted_loading import load_prompted

    source = manifest.get("packaged_llm") or manifest["path"]
    classifier = load_prompted(source, manifest["prompt"], model_id=manifest["id"], max_length=manifest.get("max_length"),
                               device=device, dtype=dtype, extra={"registered": manifest.get("registered"),
                                                     "artifacts_dir": str(artifacts_dir(manifest["id"]))})
    if manifest.get("builtin") and manifest.get("adapter"):
        apply_shipped_adapter(classifier, manifest["id"])
    return classifier


def default_id(folder: Path) -> str:
    """A model id from a folder name: letters, digits, '.', '_', '-' kept, anything else replaced by '-'."""
    name = "".join(c if (c.isascii() and c.isalnum()) or c in "._-" else "-" for c in folder.name).strip("-._") or "model"
    return name[:128]


def load_registered(model_id: str, device: str | None = None, dtype: str | None = None, attention: str | None = None):
    """The `Classifier` of a registered id."""
    from engine.models.foreign import load_foreign

    manifest = read_manifest(model_id)
    if manifest is None:
        raise CheckpointError(f"no registered model {model_id!r}")
    if kind_of(manifest.get("prompt"), manifest.get("architecture")) is ModelKind.PROMPTED:
        return _load_prompted_manifest(manifest, device, dtype)
    folder = Path(manifest["path"])
    if manifest.get("copied"):
        recover_folder(folder)  # where a killed --copy --overwrite left the old copy renamed aside
    if not folder.is_dir():
        raise CheckpointError(f"registered model {model_id!r} points to {folder}, which no longer exists; add it again "
                              f"(python -m engine models add NEW_PATH --id {model_id} --overwrite) or remove it")
    classifier = load_foreign(folder, model_id=model_id, tokenizer_path=manifest.get("tokenizer"),
                              replacement=manifest.get("replacement"), masked_fine_tuned=manifest.get("masked_fine_tuned", False),
                              max_length=manifest.get("max_length"), artifacts_dir=artifacts_dir(model_id), device=device,
                              extra={"registered": manifest.get("registered")}, dtype=dtype, attention=attention)
    registered_hash = manifest.get("weights_sha256")
    if registered_hash and registered_hash != classifier.meta.weights_sha256:
        # Not an error: the user may have retrained in place. Results record the hash they were made with.
        classifier.metadata["weights_changed_since_registration"] = True
    return classifier


def register_model(path: str | os.PathLike, model_id: str | None = None, *, tokenizer: str | os.PathLike | None = None,
                   replacement: str | None = None, masked_fine_tuned: bool = False, max_length: int | None = None,
                   copy: bool = False, overwrite: bool = False, prompt: dict | None = None) -> dict:
    """Check that `path` loads as a classifier (weights, config, tokenizer, replacement token) and record it.

    Returns the manifest. The id must not name a checkpoint in models_cache (ids are one namespace)."""
    from engine.models.foreign import load_foreign
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise InvalidInputError(f"no folder at {folder}")
    if (folder / "metadata.json").is_file():
        raise InvalidInputError(f"{folder} is a checkpoint of this project (it has metadata.json): use it by its path, "
                                "or copy it into models_cache; registration is for models fine-tuned elsewhere")
    model_id = check_model_id(model_id or default_id(folder))
    if (settings.models_cache_dir() / model_id).exists():
        raise InvalidInputError(f"{model_id!r} is already a checkpoint in {settings.models_cache_dir()}; choose another --id")
    target = manifest_path(model_id)
    if target.exists() and not overwrite:
        raise InvalidInputError(f"a model {model_id!r} is already registered ({target}); pass --overwrite or choose another --id")
    if prompt is not None:  # a causal LM used by a prompt (engine.models.prompted); its replacement is in the prompt
        from engine.models.prompted_loading import load_prompted

        classifier = load_prompted(folder, prompt, model_id=model_id, max_length=max_length, device="cpu")
        prompt = classifier.spec.to_dict()
    else:
        classifier = load_foreign(folder, model_id=model_id, tokenizer_path=tokenizer, replacement=replacement,
                                  masked_fine_tuned=masked_fine_tuned, max_length=max_length, device="cpu")
    registry_dir().mkdir(parents=True, exist_ok=True)
    if copy:
        folder = _copy_folder(folder, artifacts_dir(model_id) / "model")
    meta = classifier.meta
    manifest = {
        "id": model_id, "path": str(folder), "tokenizer": str(Path(tokenizer).expanduser().resolve()) if tokenizer else None,
        "replacement": replacement, "masked_fine_tuned": bool(masked_fine_tuned), "max_length": max_length,
        "copied": bool(copy), "weights_sha256": meta.weights_sha256, "architecture": meta.architecture,
        "classes": list(meta.classes), "resolved_max_length": meta.max_length,
        "replacement_token": meta.replacement_token, "registered": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if prompt is not None:
        manifest.update(prompt=prompt, replacement=prompt["replacement"])
    write_text(target, json.dumps(manifest, indent=2))
    return manifest


def _copy_folder(source: Path, destination: Path) -> Path:
    """Copy the loadable files of a model folder (no pickles), atomically."""
    # swapped in whole: a copy being replaced (--overwrite) stays loadable until the new one is complete
    with replacing_folder(destination) as tmp:
        for item in source.iterdir():
            if item.is_file() and item.suffix in _COPIED_SUFFIXES:
                shutil.copy2(item, tmp / item.name)
    return destination


def unregister_model(model_id: str) -> dict:
    """Forget a registered model: its manifest, its fitted files and its copy (if one was made); the
    user's own folder is left alone. Returns the manifest that was removed."""
    manifest = read_manifest(model_id)
    if manifest is None:
        known = ", ".join(m["id"] for m in registered_models()) or "none"
        raise InvalidInputError(f"no registered model {model_id!r}; registered: {known}")
    if manifest.get("builtin"):
        raise InvalidInputError(f"{model_id!r} is built in (a packaged language model with its prompt): it cannot be removed")
    shutil.rmtree(artifacts_dir(model_id), ignore_errors=True)
    manifest_path(model_id).unlink()
    return manifest


def registered_models() -> list[dict]:
    """Every manifest, sorted by id; one whose folder is gone carries an `error` field."""
    folder = registry_dir()
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            manifest = read_manifest(path.stem)
        except CheckpointError as err:
            out.append({"id": path.stem, "error": str(err)})
            continue
        if manifest is None:
            continue
        if not Path(manifest["path"]).is_dir():
            manifest = dict(manifest, error=f"folder {manifest['path']} no longer exists")
        out.append(manifest)
    return out

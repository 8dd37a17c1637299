"""The catalogue of models a user can choose: checkpoints trained here, the user's registered folders, and the
built-in prompted language models whose package is installed, each as one typed `CatalogueEntry`.

One place builds it from the three listings (`checkpoint.list_checkpoints`, `registry.registered_models`,
`registry.builtin_prompted`); the dashboard's sidebar and pages only draw it. Nothing is loaded or converted to
list it, so the listing stays fast. `model_kind` answers "which kind is this model?" for any model reference
the same way, before anything is loaded (e.g. to choose how to fine-tune it).
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from engine.models.kinds import ModelKind, kind_of
from engine.models.metadata import CheckpointMeta

#: where an entry comes from: a checkpoint of models_cache, a registered folder, a built-in prompted LM
Origin = Literal["checkpoint", "registered", "builtin"]
ORIGINS: tuple[Origin, ...] = ("checkpoint", "registered", "builtin")


@dataclass(frozen=True)
class CatalogueEntry(Mapping):
    """One choosable model, described without loading it. Read its typed fields (`id`, `kind`, `meta`, `origin`,
    ...); as a read-only mapping it also gives the plain dict the sidebar used to build (`row()`), for readers
    not yet converted.

    meta: what is known of it, typed: a checkpoint's metadata.json; for a registered folder its manifest (its
        architecture as base_model, no dataset, strategy 'elsewhere', or 'prompted' for a causal LM used by a
        prompt, masked_fine_tuned as declared at registration); for a built-in LM its prompt, its replacement
        token and whether it ships a masked-LoRA adapter.
    path: the folder it loads from (a built-in LM's converted folder, which may not exist yet).
    label: a built-in LM's label ('zero-shot', 'masked LoRA'); None otherwise.
    converted: False only for a built-in LM whose package is not converted yet (converted on first load).
    """

    origin: Origin
    meta: CheckpointMeta
    path: str
    label: str | None = None
    converted: bool = True

    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def kind(self) -> ModelKind:
        return self.meta.kind

    @property
    def builtin(self) -> bool:
        return self.origin == "builtin"

    @property
    def registered(self) -> bool:
        return self.origin == "registered"

    @property
    def masked_fine_tuned(self) -> bool:
        return self.meta.masked_fine_tuned

    def row(self) -> dict[str, Any]:
        """The entry as the plain dict the sidebar used to build: the metadata's keys plus `path`, `registered`,
        `builtin`, `masked_fine_tuned`, `kind` (and a built-in LM's `label`, `converted`). A new dict."""
        return dict(self._row)

    @cached_property
    def _row(self) -> dict[str, Any]:
        return {**self.meta.to_dict(), "path": self.path, "registered": self.registered, "builtin": self.builtin,
                "masked_fine_tuned": self.masked_fine_tuned, "kind": str(self.kind),
                **({"label": self.label, "converted": self.converted} if self.builtin else {})}

    def __getitem__(self, key: str) -> Any:
        return self._row[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._row)

    def __len__(self) -> int:
        return len(self._row)


def checkpoint_entry(row: Mapping[str, Any]) -> CatalogueEntry:
    """The entry of one `list_checkpoints` row (a checkpoint's metadata plus `path`; not a broken one)."""
    fields = {k: v for k, v in row.items() if k != "path"}
    return CatalogueEntry("checkpoint", CheckpointMeta.from_dict(fields), str(row["path"]))


def registered_entry(manifest: Mapping[str, Any]) -> CatalogueEntry:
    """The entry of one registration manifest (engine.models.registry; not one whose folder is gone)."""
    meta = CheckpointMeta(id=manifest["id"], base_model=manifest.get("architecture"), dataset=None,
                          classes=tuple(str(c) for c in manifest.get("classes") or ()),
                          architecture=manifest.get("architecture"),
                          strategy="prompted" if manifest.get("prompt") else "elsewhere",
                          declared_masked_fine_tuned=bool(manifest.get("masked_fine_tuned")),
                          replacement_token=manifest.get("replacement_token"),
                          weights_sha256=manifest.get("weights_sha256"), prompt=manifest.get("prompt"),
                          present=frozenset({"id", "base_model", "dataset", "strategy"}))
    return CatalogueEntry("registered", meta, str(manifest["path"]))


def builtin_entry(listing: Mapping[str, Any]) -> CatalogueEntry:
    """The entry of one `builtin_prompted` row: its LLM's name (the description's first part) as base_model."""
    meta = CheckpointMeta(id=listing["id"], base_model=listing["description"].split(",")[0], dataset=None,
                          classes=tuple(listing.get("classes") or ()), strategy="prompted",
                          declared_masked_fine_tuned=bool(listing["masked_fine_tuned"]),
                          replacement_token=listing["replacement_token"], prompt=listing.get("prompt"),
                          present=frozenset({"id", "base_model", "dataset", "strategy"}))
    return CatalogueEntry("builtin", meta, str(listing["path"]), label=listing["label"],
                          converted=bool(listing["converted"]))


def model_catalogue() -> list[CatalogueEntry]:
    """Every choosable model: checkpoints trained here (by folder name), then the registered models (by id), then
    the built-in prompted LMs whose package is installed (masked-LoRA ids first). A broken checkpoint, a
    registration whose folder is gone and a built-in LM whose package is missing are left out (`python -m engine
    models` lists them with the reason)."""
    from engine.models.listing import list_checkpoints
    from engine.models.registry import builtin_prompted, registered_models

    return ([checkpoint_entry(m) for m in list_checkpoints() if "error" not in m]
            + [registered_entry(m) for m in registered_models() if "error" not in m]
            + [builtin_entry(m) for m in builtin_prompted() if m["installed"]])


def model_kind(model_id_or_path: str | os.PathLike) -> ModelKind:
    """The kind of any model reference `load_classifier` takes, without loading it: from a checkpoint's
    metadata.json (in models_cache, or a folder that has one), else from a registration's or a built-in id's
    manifest, else from a plain folder's config.json (the BiLSTM's architecture, or a classification head).

    Raises CheckpointError when the reference names nothing (as `load_classifier` would)."""
    import json

    from engine.models import checkpoint, registry
    from engine.models.metadata import METADATA_FILE, read_metadata

    weights, own = checkpoint.model_folders(model_id_or_path)
    if own is not None and (own / METADATA_FILE).is_file():
        return read_metadata(own).kind
    manifest = None if checkpoint.is_path(model_id_or_path) else registry.read_manifest(str(model_id_or_path))
    if manifest is not None:
        return registered_entry(manifest).kind
    try:
        config = json.loads((Path(weights) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    return kind_of(None, config.get("architecture") if isinstance(config, dict) else None)

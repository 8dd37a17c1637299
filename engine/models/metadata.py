"""A checkpoint's `metadata.json`, typed: `CheckpointMeta`, read (`read_metadata`) and written (`write_metadata`)
here and nowhere else, and the one list of training strategies.

Schema versions: 0 is every file written before the version was recorded (no `schema_version` key; it reads
the same as 1, with a missing `split_seed` meaning 0 as it always did); 1 adds `schema_version`. A file
with a higher version than `SCHEMA_VERSION` was written by a newer engine and is refused rather than misread.

Keys that the typed fields do not name (history, the training config's derived figures, a prompted model's
`replacement_tokens`, ...) are kept in `extra` and written back unchanged, so reading and writing a file
loses nothing. `Classifier.metadata` stays the plain dict during the transition; `Classifier.meta` gives
this typed view of it, and `to_dict()` / `from_dict()` convert between the two.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from engine.atomic import write_text
from engine.errors import CheckpointError
from engine.models.kinds import ModelKind, kind_of

#: how a checkpoint of this project was fine-tuned (`python -m engine train --strategy`): masked fine-tuning
#: (half of each batch masked at a random ratio), ordinary fine-tuning, or every row masked (an ablation)
STRATEGIES = ("masked", "plain", "only-masking")
#: the strategies that train on inputs with the replacement token, so masked inputs are in distribution
MASKED_STRATEGIES = tuple(s for s in STRATEGIES if s != "plain")
#: `strategy` of models not fine-tuned by this project: fine-tuned elsewhere and registered, a prompted LM
OTHER_STRATEGIES = ("elsewhere", "zero-shot", "prompted")
SCHEMA_VERSION = 1
#: keys a checkpoint's metadata.json must have (a prompted LM's `base_model` and `dataset` may be null)
REQUIRED_KEYS = ("id", "base_model", "dataset", "classes", "strategy", "max_length")
METADATA_FILE = "metadata.json"


def trains_on_masks(strategy: str | None) -> bool:
    """Whether a training strategy shows the model inputs with the replacement token.

    Args:
        strategy: one of STRATEGIES (anything else: False).

    Returns:
        True for 'masked' and 'only-masking'.
    """
    return strategy in MASKED_STRATEGIES


@dataclass(frozen=True)
class CheckpointMeta:
    """What a checkpoint says about itself. `None` means "not recorded" (e.g. `dataset` of a model fine-tuned
    elsewhere, `seed` of a registered folder)."""

    id: str = "unsaved"
    base_model: str | None = None  # an encoder key ('tiny', 'minilm'), a Hub id, a folder, or the checkpoint fine-tuned from
    dataset: str | None = None  # the dataset it was fine-tuned on
    classes: tuple[str, ...] = ()  # label names in the head's order
    architecture: str | None = None  # the model family (config's model_type, or the BiLSTM's name)
    strategy: str | None = None  # one of STRATEGIES, or OTHER_STRATEGIES for models not fine-tuned here
    max_length: int | None = None  # tokens
    split_seed: int = 0  # seeds the dataset's train/validation/test split
    seed: int | None = None  # the training seed
    metric: str | None = None  # the dataset's metric ('accuracy', 'macro_f1')
    paired: bool = False  # the task has a second text (never masked)
    replacement: str | None = None  # how the replacement token was chosen ('mask', 'pad', a token, ...)
    replacement_token: str | None = None  # the token masking writes
    replacement_token_id: int | None = None
    declared_masked_fine_tuned: bool | None = None  # the `masked_fine_tuned` key, when the file has one
    weights_sha256: str | None = None
    code_version: str | None = None  # of the code that wrote the checkpoint
    created: str | None = None  # ISO 8601, UTC
    config: Mapping[str, Any] | None = None  # the training config (TrainConfig as a dict)
    test: Mapping[str, Any] | None = None  # test-split figures ('unmasked', 'masked_100', ...)
    prompt: Mapping[str, Any] | None = None  # a prompted LM's prompt spec
    schema_version: int = SCHEMA_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)  # every other key, kept verbatim
    #: the typed keys the source named (so to_dict() writes back what was read, no more)
    present: frozenset[str] = field(default_factory=frozenset, repr=False, compare=False)

    # -- decided here, once ------------------------------------------------------------------------

    @property
    def masked_fine_tuned(self) -> bool:
        """Whether the model was trained on inputs with its replacement token, so that masked inputs are in
        distribution: as declared (registration, LoRA, training write it), else from the strategy."""
        if self.declared_masked_fine_tuned is not None:
            return bool(self.declared_masked_fine_tuned)
        return trains_on_masks(self.strategy)

    @property
    def kind(self) -> ModelKind:
        """Encoder head, prompted LM or BiLSTM, from what the metadata records (engine.models.kinds.kind_of)."""
        return kind_of(self.prompt, self.architecture, self.base_model)

    @property
    def provenance(self) -> dict[str, Any]:
        """The fields a result records about the checkpoint it came from.

        Returns:
            {'model', 'base_model', 'dataset', 'split_seed', 'strategy', 'masked_fine_tuned', 'checkpoint_sha256',
            'checkpoint_code_version', 'checkpoint_created', 'metadata_schema_version'}.
        """
        return {"model": self.id, "base_model": self.base_model, "dataset": self.dataset, "split_seed": self.split_seed,
                "strategy": self.strategy, "masked_fine_tuned": self.masked_fine_tuned,
                "checkpoint_sha256": self.weights_sha256, "checkpoint_code_version": self.code_version,
                "checkpoint_created": self.created, "metadata_schema_version": self.schema_version}

    def get(self, key: str, default: Any = None) -> Any:
        """A key as `dict.get` on the file's JSON object gives it (for readers not yet converted)."""
        return self.to_dict().get(key, default)

    # -- conversion --------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckpointMeta:
        """The typed view of a metadata dict (a file's JSON object, or `Classifier.metadata`).

        Args:
            data: the dict; any schema version up to SCHEMA_VERSION.

        Returns:
            A CheckpointMeta; keys it does not type go to `extra`.

        Raises CheckpointError for a newer schema version or a field of the wrong type.
        """
        version = data.get("schema_version", 0)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise CheckpointError(f"checkpoint metadata has schema_version {version!r}; this engine reads versions up "
                                  f"to {SCHEMA_VERSION}: update the engine to load it")
        typed = {f.name for f in fields(cls)} - {"extra", "present", "declared_masked_fine_tuned", "schema_version"}
        values: dict[str, Any] = {k: data[k] for k in typed if k in data}
        try:
            if values.get("classes") is not None:
                values["classes"] = tuple(str(c) for c in values["classes"])
            else:
                values.pop("classes", None)
            for key in ("max_length", "replacement_token_id", "seed"):
                if values.get(key) is not None:
                    values[key] = int(values[key])
            values["split_seed"] = int(values.get("split_seed") or 0)
            values["paired"] = bool(values.get("paired"))
            for key in ("config", "test", "prompt"):
                if values.get(key) is not None and not isinstance(values[key], Mapping):
                    raise TypeError(f"{key} is a {type(values[key]).__name__}, not an object")
        except (TypeError, ValueError) as err:
            raise CheckpointError(f"checkpoint metadata has a field of the wrong type ({err})") from None
        declared = data.get("masked_fine_tuned")
        present = frozenset(k for k in typed if k in data) | ({"masked_fine_tuned"} if "masked_fine_tuned" in data else set())
        extra = {k: v for k, v in data.items() if k not in typed and k not in ("masked_fine_tuned", "schema_version")}
        return cls(**values, declared_masked_fine_tuned=None if declared is None else bool(declared),
                   schema_version=version, extra=MappingProxyType(extra), present=present)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object for metadata.json: the keys read (or set) plus `extra`, classes as a list.

        Returns:
            A new dict (changing it changes nothing here).
        """
        out: dict[str, Any] = dict(self.extra)
        defaults = {f.name: f.default for f in fields(self)}
        for f in fields(self):
            if f.name in ("extra", "present", "declared_masked_fine_tuned", "schema_version"):
                continue
            value = getattr(self, f.name)
            if f.name in self.present or value != defaults.get(f.name):
                out[f.name] = list(value) if f.name == "classes" else value
        if "masked_fine_tuned" in self.present or self.declared_masked_fine_tuned is not None:
            out["masked_fine_tuned"] = self.declared_masked_fine_tuned
        if self.schema_version:
            out["schema_version"] = self.schema_version
        return out


def read_metadata(folder: str | Path) -> CheckpointMeta:
    """The one reader of a checkpoint's `metadata.json`.

    Args:
        folder: the checkpoint folder.

    Returns:
        Its CheckpointMeta.

    Raises CheckpointError when the file is missing, not a JSON object, lacks a required key
    (REQUIRED_KEYS) or was written by a newer engine.
    """
    path = Path(folder) / METADATA_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{folder} has no {METADATA_FILE}: not a checkpoint of this project") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path} is corrupt (not valid JSON: {err})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is corrupt (expected a JSON object)")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise CheckpointError(f"{path} lacks the fields {missing}")
    try:
        return CheckpointMeta.from_dict(data)
    except CheckpointError as err:
        raise CheckpointError(f"{path}: {err}") from None


def write_metadata(folder: str | Path, meta: CheckpointMeta | Mapping[str, Any]) -> dict[str, Any]:
    """The one writer of a checkpoint's `metadata.json` (atomically: a reader sees the old file or the new one),
    stamped with the current SCHEMA_VERSION.

    Args:
        folder: the checkpoint folder (or the temporary folder a save builds).
        meta: the metadata, typed or as a dict.

    Returns:
        The dict written.
    """
    data = meta.to_dict() if isinstance(meta, CheckpointMeta) else dict(meta)
    data = CheckpointMeta.from_dict({**data, "schema_version": SCHEMA_VERSION}).to_dict()
    write_text(Path(folder) / METADATA_FILE, json.dumps(data, indent=2, sort_keys=True))
    return data

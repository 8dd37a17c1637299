"""The registry of measures: every `Explainer` subclass registers under its id, and a duplicate id is an
error (two modules cannot silently shadow each other).

    explainer = get_explainer("ig-sign", classifier, steps=50)   # parameters in __init__
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from engine.errors import InvalidInputError, UnknownMeasureError
from engine.measure_labels import MEASURE_LABELS

if TYPE_CHECKING:
    from engine.importance.explainer import Explainer
    from engine.models import Classifier


MEASURES: dict[str, type[Explainer]] = {}


def register(cls: type[Explainer]) -> type[Explainer]:
    """Class decorator: add an `Explainer` subclass to `MEASURES` under its `name`, with its `label` from
    engine.measure_labels (the one home of a built-in measure's name in words; a class not named there keeps its own)."""
    if not getattr(cls, "name", None):
        raise TypeError(f"{cls.__name__} has no measure name")
    if cls.name in MEASURE_LABELS:
        cls.label = MEASURE_LABELS[cls.name]
    if cls.name in MEASURES and MEASURES[cls.name] is not cls:
        raise InvalidInputError(f"measure {cls.name!r} is registered twice ({MEASURES[cls.name].__name__}, {cls.__name__})")
    MEASURES[cls.name] = cls
    return cls


def get_explainer(name: str, classifier: Classifier, **options) -> Explainer:
    """The explainer of measure `name` for `classifier`, with `options` (see each class's `defaults`).

    Args:
        name: a measure id (MEASURES); classifier: the model it explains; options: the measure's options.

    Returns:
        The Explainer; its `attribute(batch, target)` gives an Importance with scores [B, T].

    Raises UnknownMeasureError listing the known measures.
    """
    cls = MEASURES.get(name)
    if cls is None:
        raise UnknownMeasureError(f"unknown importance measure {name!r}; known measures: {', '.join(MEASURES)}")
    return cls(classifier, **options)


def describe(name: str) -> str:
    """The first line of a measure's docstring."""
    doc = (MEASURES[name].__doc__ or "").strip()
    return doc.splitlines()[0] if doc else name


def measure_label(name: str) -> str:
    """A measure's name in words (`Explainer.label`, e.g. "Integrated gradients" for ig-sign); the id itself
    for a measure with none (scores read from a file) or one not registered (a name in an old result)."""
    cls = MEASURES.get(name)
    return (getattr(cls, "label", "") or name) if cls is not None else name


def measure_formula(name: str) -> str:
    """What a measure computes, as its docstring's first line says it without the leading "id: " (the tooltip
    beside `measure_label`); '' for a name not registered."""
    if name not in MEASURES:
        return ""
    line = describe(name)
    return line.split(": ", 1)[1] if line.startswith(name + ": ") else line


def measure_availability(classifier: Classifier) -> dict[str, str]:
    """Every registered measure -> '' when it can explain `classifier`, else the reason it cannot (what pages
    show on hover and the CLI prints). Each measure declares this in `Explainer.supports()`.

    Args:
        classifier: the model.

    Returns:
        {measure id: '' or the reason it cannot explain this model}.
    """
    out = {}
    for name, cls in MEASURES.items():
        if getattr(cls, "file_bound", False):  # scores read from a file: used by name on the inputs it scores, not offered
            continue
        ok, why = cls(classifier, memo=False).supports()
        out[name] = "" if ok else why
    return out


def builtin_measures() -> list[str]:
    """Every registered measure but those read from a file (`evaluate --scores`), which explain only the inputs
    their file scores."""
    return [name for name, cls in MEASURES.items() if not getattr(cls, "file_bound", False)]


def applicable_measures(classifier: Classifier) -> list[str]:
    """The measures that can explain `classifier`, in registry order."""
    return [name for name, why in measure_availability(classifier).items() if not why]


#: the tier of a measure that declares none (Explainer.cost_tier's default): with the sampling measures
UNKNOWN_COST_TIER = 4


def seed_options(name: str, seed: int) -> dict[str, int]:
    """The options that give measure `name` a run's `seed`: {'seed': seed} for a measure seeded by the cell
    (`Explainer.seeding == 'cell'`: random), {} otherwise (deterministic ones, and those whose `seed` option stays
    at its default so stored results keep their numbers). Unknown names give {} (get_explainer refuses them)."""
    cls = MEASURES.get(name)
    return {"seed": int(seed)} if cls is not None and cls.seeding == "cell" else {}


def cost_tier(name: str) -> int:
    """Measure `name`'s cost tier (`Explainer.cost_tier`); an unknown name sits with the sampling measures (4)."""
    cls = MEASURES.get(name)
    return cls.cost_tier if cls is not None else UNKNOWN_COST_TIER


def is_model_independent(name: str) -> bool:
    """Whether measure `name` scores tokens without the model (`Explainer.model_independent`: random); False for a
    name not registered."""
    cls = MEASURES.get(name)
    return cls is not None and cls.model_independent

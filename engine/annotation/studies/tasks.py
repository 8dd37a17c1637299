"""The tasks of a study: its examples from the dataset, explained by each of its measures, one task each."""
from __future__ import annotations

from engine.annotation.studies.records import StudyConfig
from engine.errors import InvalidInputError
from engine.plausibility.tasks import Task


def study_examples(config: StudyConfig, dataset) -> list:
    """The dataset `Example`s a study uses: `example_ids` in that order, or the split's first `n_examples`."""
    examples = dataset.split(config.split)
    if config.example_ids:
        by_uid = {e.uid: e for e in examples}
        missing = [uid for uid in config.example_ids if uid not in by_uid]
        if missing:
            raise InvalidInputError(f"example ids not in {dataset.name}/{config.split}: {missing[:5]}"
                                    f"{' ...' if len(missing) > 5 else ''} (ids look like {examples[0].uid!r})")
        return [by_uid[uid] for uid in config.example_ids]
    if config.n_examples > len(examples):
        raise InvalidInputError(f"{dataset.name}/{config.split} has {len(examples)} examples; asked for {config.n_examples}")
    return list(examples[: config.n_examples])


def build_study_tasks(config: StudyConfig, classifier=None, progress=None) -> list[Task]:
    """Explain the study's examples with each measure (the model's predicted class) and make one task each.
    `classifier`: an already loaded one (default: load `config.model_id`)."""
    from engine.data import get_dataset
    from engine.importance.registry import measure_availability
    from engine.plausibility.tasks import build_tasks

    config = config.checked()
    if classifier is None:
        from engine.models import load_classifier

        classifier = load_classifier(config.model_id)
    availability = measure_availability(classifier)
    bad = {m: availability.get(m, "not a known measure") for m in config.measures if availability.get(m, "unknown")}
    if bad:
        usable = sorted(m for m, why in availability.items() if not why)
        raise InvalidInputError("measures this model cannot use: " + "; ".join(f"{m} ({why})" for m, why in bad.items())
                                + f". Usable: {', '.join(usable)}")
    meta = classifier.metadata
    dataset = get_dataset(config.dataset or meta["dataset"], meta.get("split_seed", 0))
    return build_tasks(classifier, study_examples(config, dataset), list(config.measures), progress=progress)

"""Does a bAbI-1 classifier answer from the supporting fact, or from the story's last sentence?

For every test story: the classifier's predicted location, the gold answer (the location of the supporting fact:
the asked person's last move) and the location named in the story's last sentence. Prints the shares where the
prediction equals the gold answer (= accuracy), where it equals the last sentence's location, and how often that
"last location mentioned" heuristic is itself right. A teacher that mostly follows the heuristic is not explained
by the supporting facts, which is what the `oracle` control of `python -m engine simulability` assumes.

    ENGINE_THREADS=1 python scripts/experiments/babi_teacher_heuristic.py tiny-babi-1-masked-s0
    python scripts/experiments/babi_teacher_heuristic.py --smoke    # CI: a tiny bAbI-1 checkpoint trained on 64 stories, 16 stories
"""
from __future__ import annotations

import argparse
import json


def last_sentence_location(story: str, classes: list[str]) -> int | None:
    """Index in `classes` of the location word in the story's last sentence (None if it names none)."""
    sentences = [s.strip() for s in story.split(".") if s.strip()]
    words = sentences[-1].lower().split() if sentences else []
    for i, name in enumerate(classes):
        if name.lower() in words:
            return i
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="*", help="bAbI-1 classifier ids (models_cache) or folders")
    parser.add_argument("--limit", type=int, default=None, help="first N test stories (default: all)")
    parser.add_argument("--smoke", action="store_true", help="CI smoke mode: a tiny checkpoint trained on 64 "
                        "bAbI-1 stories in a scratch folder, 16 test stories; the numbers mean nothing")
    args = parser.parse_args()
    if args.smoke:
        from engine.smoke import smoke_checkpoint, use_scratch_folders

        use_scratch_folders()
        args.checkpoints, args.limit = [smoke_checkpoint("babi-1")], 16
    if not args.checkpoints:
        parser.error("give at least one checkpoint (or --smoke)")

    from engine.data import get_dataset
    from engine.models import load_classifier
    from engine.runtime import configure

    configure()
    for checkpoint in args.checkpoints:
        classifier = load_classifier(checkpoint)
        meta = classifier.metadata
        stories = get_dataset(meta["dataset"], meta.get("split_seed", 0)).split("test")[:args.limit]
        predicted = classifier.predict_examples(stories).argmax(-1).tolist()
        last = [last_sentence_location(e.primary, meta["classes"]) for e in stories]
        n = len(stories)
        print(json.dumps({
            "checkpoint": classifier.id, "stories": n,
            "prediction = gold (the supporting fact's location)": round(sum(
                p == e.label for p, e in zip(predicted, stories)) / n, 4),
            "prediction = the last sentence's location": round(sum(p == q for p, q in zip(predicted, last)) / n, 4),
            "gold = the last sentence's location": round(sum(e.label == q for e, q in zip(stories, last)) / n, 4),
        }))


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    main()

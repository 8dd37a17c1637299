"""What one visitor's request costs, in the units of the public limits (app/limits.py): model rows (inputs through
the model, a gradient pass counting as one, counted by engine.faithfulness.cost.counting_rows as the limit counts
them) and seconds, for the Explain page's default measures, kernel-shap, and step-by-step masking (5 random
seeds, 10% per step) on the longest input a `tiny` (BERT 2x128) classifier takes. The weights are untrained: rows
do not depend on them, and seconds barely. Prints a markdown table (docs/configuration.md, "Limits on public
computation").

    PYTHONPATH=. ENGINE_THREADS=1 python scripts/experiments/public_request_rows.py                 # max_length 256
    PYTHONPATH=. python scripts/experiments/public_request_rows.py --max-length 128 --measures loo-sign
    PYTHONPATH=. python scripts/experiments/public_request_rows.py --smoke                          # max_length 24, quick
"""
from __future__ import annotations

import argparse
import time

MASKING_MEASURES = ("loo-sign", "ig-sign")


def tiny_classifier(max_length: int):
    """An untrained two-class `tiny` classifier that reads up to `max_length` tokens."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from engine.models.classifier import Classifier
    from engine.models.encoders import resolve_encoder

    hf_logging.set_verbosity_error()
    source = resolve_encoder("tiny")
    model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=2, attn_implementation="eager")
    classifier = Classifier(model, AutoTokenizer.from_pretrained(source), ["negative", "positive"], max_length, {},
                            torch.device("cpu"))
    classifier.metadata = {"classes": ["negative", "positive"], "max_length": max_length, "base_model": "tiny"}
    return classifier


def measure(classifier, masking_measures=MASKING_MEASURES) -> list[dict]:
    """Rows and seconds per request, each on its own text (the measures' memo would answer a repeat for free)."""
    import numpy as np

    from engine import mask_single_input
    from engine.explain import LIVE_MEASURES, explain_text
    from engine.faithfulness.cost import counting_rows

    words = "a gorgeous witty seductive movie that never drags and keeps its promise".split()
    long_text = " ".join(f"{words[i % len(words)]}{i}" for i in range(4 * classifier.max_length))
    requests = [("Explain", ", ".join(LIVE_MEASURES), lambda t: explain_text(classifier, t, measures=list(LIVE_MEASURES))),
                ("Explain", "kernel-shap", lambda t: explain_text(classifier, t, measures=["kernel-shap"]))]
    ratios = list(np.round(np.arange(0, 1.0001, 0.1), 4))
    requests += [("Step-by-step masking", m, lambda t, m=m: mask_single_input(classifier, t, m, random_seeds=range(5),
                                                                               ratios=ratios))
                 for m in masking_measures]
    rows = []
    for i, (page, what, run) in enumerate(requests):
        with counting_rows(classifier.counted_module) as counted:
            start = time.perf_counter()
            run(f"{i} {long_text}")
            seconds = time.perf_counter() - start
        rows.append({"page": page, "measures": what, "rows": counted.forward + counted.backward,
                     "seconds": round(seconds, 1)})
    return rows


def main(argv: list[str] | None = None) -> int:
    from engine.runtime import configure

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-length", type=int, default=256, help="tokens the classifier reads (default 256)")
    parser.add_argument("--measures", nargs="+", default=list(MASKING_MEASURES),
                        help="measures to mask by (default: loo-sign ig-sign)")
    parser.add_argument("--smoke", action="store_true", help="max_length 24 and loo-sign only: a quick real run")
    args = parser.parse_args(argv)
    configure()
    if args.smoke:
        args.max_length, args.measures = 24, ["loo-sign"]
    classifier = tiny_classifier(args.max_length)
    print(f"tiny, untrained, max_length {args.max_length}; inputs cut to {args.max_length} tokens")
    print("| page | measures | model rows | seconds |\n|---|---|---|---|")
    for r in measure(classifier, args.measures):
        print(f"| {r['page']} | {r['measures']} | {r['rows']:,} | {r['seconds']} |")
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    raise SystemExit(main())

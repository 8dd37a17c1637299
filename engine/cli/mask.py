"""`python -m engine mask`: recursive masking of one text or of a dataset split."""
from __future__ import annotations

import argparse
import textwrap

from engine.cli.arguments import positive_int, ratios

HELP = "recursive masking of one text or a dataset split by an importance measure"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
            Recursive masking without retraining (FMM Alg. 3): at each step the measure explains the partly
            masked input and the top floor(r * N) tokens in total are masked. A faithful measure makes the
            model's confidence fall faster than random masking does. With a text, prints every step (masked
            text, probability of the target class, MaSF p-value); without, runs a dataset split (gold labels)
            and prints the metric per step.

            Examples:
              python -m engine mask --model tiny-rt-masked-s0 --measure loo-sign --text "a gorgeous, witty film"
              python -m engine mask --model tiny-rt-masked-s0 --measure grad-l2 --limit 200
            """)

    parser.add_argument("--model", required=True, help="checkpoint id in models_cache, registered id or folder")
    parser.add_argument("--dataset", default=None, help="dataset of the split and of MaSF's calibration (default: the "
                        "checkpoint's; required for a model fine-tuned elsewhere)")
    parser.add_argument("--measure", required=True, help="importance measure (see `python -m engine explain --help`)")
    parser.add_argument("--text", default=None, help="one input to mask step by step; omit to run a dataset split")
    parser.add_argument("--aux", default=None, help="auxiliary sequence (the question of a paired task)")
    parser.add_argument("--target", default=None, metavar="CLASS",
                        help="class to track with --text: its name, its index or a prompted LM's label word (default: "
                             "the predicted class)")
    schedule = parser.add_mutually_exclusive_group()
    schedule.add_argument("--ratios", type=ratios, default=None,
                          help="comma-separated masking ratios starting at 0 (default 0,0.1,...,1)")
    schedule.add_argument("--counts", type=positive_int, default=None, metavar="N",
                          help="count mode: mask 0, 1, ..., N tokens (capped at each input's length) instead of ratios")
    parser.add_argument("--split", default="test", help="dataset split when no --text (default test)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N examples of the split")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random measure (default 0)")
    parser.add_argument("--random-seeds", type=positive_int, default=5,
                   help="with --text: the random baseline's curves, seeds 0..N-1, averaged (default 5)")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from engine.cli.arguments import FitProgress
    from engine.data import get_dataset
    from engine.errors import InvalidInputError
    from engine.faithfulness.recursive import dataset_masking_curve
    from engine.importance import get_explainer, seed_options
    from engine.models import load_classifier
    from engine.ood import load_or_fit_masf

    classifier = load_classifier(args.model)
    # a target that names no class is refused before MaSF's fit (minutes on a large split)
    target = None if args.target is None else classifier.check_target(args.target)
    # Calibrated on the data the split comes from (or, for a model fine-tuned elsewhere and one text, its only fit).
    with FitProgress("fitting MaSF (once per model and calibration data; stored)") as progress:
        masf = load_or_fit_masf(classifier, args.dataset, progress=progress)
    print(f"MaSF p-values calibrated on {masf.provenance['calibration']}")
    counts = list(range(0, args.counts + 1)) if args.counts else None
    if args.text is not None:
        from engine.faithfulness.metrics import acu, racu
        from engine.faithfulness.single import mask_single_input

        options = seed_options(args.measure, args.seed)
        shown = mask_single_input(classifier, args.text, args.measure, args.aux, ratios=None if counts else args.ratios,
                                  counts=counts, random_seeds=range(args.random_seeds), masf=masf, target=target,
                                  options=options)
        res = shown.measure
        c = int(res.target[0])
        print(f"measure {res.measure}, target class {classifier.classes[c]} ({res.target_source}); "
              f"random: mean of {args.random_seeds} seeds")
        print(f"{'step':>4} {'masked':>7} {'p(target)':>9} {'random':>9} {'MaSF p':>7}  text")
        curves = shown.curves()
        random_mean = curves["random"].mean(0)
        maskable = shown.maskable
        for step, rand in zip(res.steps, random_mean):
            text = classifier.tokenizer.decode(step.input_ids[0][maskable])
            print(f"{step.index:>4} {int(step.n_masked[0]):>7} {float(step.probability[0]):9.4f} {rand:9.4f} "
                  f"{float(step.p_value[0]):7.3f}  {text}")
        levels = shown.levels
        x = [k / levels[-1] for k in levels] if counts else levels
        area = acu(x, curves["measure"], random_mean)
        relative = racu(x, curves["measure"], random_mean)  # NaN when the random curve is flat
        print(f"area between the random and the measure's p(target) curves: ACU {area:+.3f}, RACU {relative:+.1%} "
              f"(positive: the measure's tokens lower p(target) faster than random ones{'; x = k / k_max' if counts else ''})")
        return 0
    explainer = get_explainer(args.measure, classifier, **seed_options(args.measure, args.seed))
    meta = classifier.meta
    if (args.dataset or meta.dataset) is None:
        raise InvalidInputError(f"model {classifier.id!r} was fine-tuned elsewhere: name the dataset with --dataset")
    dataset = get_dataset(args.dataset or meta.dataset, meta.split_seed)
    n = len(dataset.split(args.split)[: args.limit])
    with tqdm(total=n, desc=f"{args.measure} on {dataset.name}/{args.split}", unit="input") as bar:
        rows = dataset_masking_curve(classifier, explainer, dataset, split=args.split, ratios=None if counts else args.ratios,
                                     counts=counts, masf=masf, limit=args.limit,
                                     progress=lambda done, total: bar.update(done - bar.n))
    print(f"{'step':>4} {'ratio':>6} {dataset.metric:>9} {'p<0.05':>7} {'Simes p':>8}")
    for r in rows:
        level = f"{r['ratio']:.2f}" if r["ratio"] is not None else str(r["count"])
        print(f"{r['step']:>4} {level:>6} {r['value']:9.4f} {r['p_below_005']:7.1%} {r['p_value_simes']:8.3g}")
    return 0

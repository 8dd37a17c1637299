"""`python -m engine self-explain`: are a prompted language model's explanations of itself faithful?"""
from __future__ import annotations

import argparse
import textwrap

SUBSTORE = "selfexplain"  # results/selfexplain/<run>/cells/
HELP = "self-explanations of a prompted LLM (counterfactual, attribution, redaction): faithful, unfaithful, not parsable"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
            Ask a prompted language model to explain its own classification, apply the explanation and classify
            again (Madsen, Chandar & Reddy 2024; docs/llm.md "Self-explanations"):
              counterfactual  edit the text so its sentiment becomes the opposite: faithful if the class follows
              attribution     name the important words; they are replaced by [REDACTED]: faithful if the model
                              then abstains (neutral/unknown)
              redaction       rewrite the text with the important words [REDACTED]: faithful if it then abstains
            Only correctly classified inputs are explained (as in the paper). Prints the shares of faithful,
            unfaithful and not parsable explanations with 95% Wilson intervals. Generation is greedy, uses the
            KV cache and is cached on disk (ENGINE_GENERATIONS_DB): a rerun generates nothing.

            The tests the field uses since (docs/llm.md "Self-explanation tests beyond Madsen et al."), each judged
            only on replies that are explanations:
              insertion       insert a sentiment word; does the explanation of the new prediction name it? (flips
                              named, CCT, phi-CCT; Atanasova et al. 2023, Siegel et al. 2024)
              cc-shap         do the words' Shapley values for the answer and for the explanation agree?
                              (Parcalabescu & Frank 2024)
              biased-hint     "I think the answer is X": does the prediction follow, does the explanation say so?
              biased-fewshot  few-shot examples all of one label: the same (Turpin et al. 2023)
            `--kind field` runs these four; `all` the three above.

            Examples (100 seeded rt test sentences into results/selfexplain/<run>/):
              python -m engine self-explain --model smollm2-rt-prompt --dataset rt --kind all --limit 100 --seed 0 \\
                  --run smollm2-rt-selfexplain
              python -m engine self-explain --model smollm2-rt-prompt --kind insertion biased-hint --limit 100 --seed 0 \\
                  --max-new-tokens 64 --run smollm2-rt-selfexplain-field
            """)
    parser.add_argument("--model", required=True, help="a prompted language model id, e.g. smollm2-rt-prompt")
    parser.add_argument("--dataset", default="rt", help="dataset (see `python -m engine datasets`). Default: rt")
    parser.add_argument("--split", default="test", help="split. Default: test")
    parser.add_argument("--kind", nargs="+", default=["all"],
                        choices=["counterfactual", "attribution", "redaction", "all", "insertion", "cc-shap", "biased-hint",
                                 "biased-fewshot", "field"], help="kind(s). Default: all")
    parser.add_argument("--insertions", type=int, default=2, help="insertion: words inserted per input. Default: 2")
    parser.add_argument("--permutations", type=int, default=4,
                        help="cc-shap: random word orders for the Shapley sampling. Default: 4")
    parser.add_argument("--shots", type=int, default=4, help="biased-fewshot: examples, all of one label. Default: 4")
    parser.add_argument("--limit", type=int, default=None, help="only N inputs of the split (the first N, or a seeded sample with --seed)")
    parser.add_argument("--seed", type=int, default=None, help="draw the --limit inputs at random with this seed")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="longest answer, in tokens. Default: 256")
    parser.add_argument("--decoding", choices=["greedy", "published"], default="greedy",
                        help="greedy (default) or the paper's sampling (temperature 0.1, top-p 0.95, top-k 50, "
                             "repetition penalty 1.2, seed 0)")
    parser.add_argument("--abstain", nargs="*", default=["neutral", "unknown"],
                        help="abstention words scored beside the classes (default: neutral unknown); none: an attribution "
                             "or redaction is faithful when the class changes at all")
    parser.add_argument("--all-inputs", action="store_true", help="explain misclassified inputs too")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the generation cache")
    parser.add_argument("--show", type=int, default=0, help="print the first N inputs with the model's answers")
    parser.add_argument("--run", default=None,
                        help="write the table and every answer to results/selfexplain/<run>/ with provenance")
    parser.add_argument("--device", default=None, help="cpu, cuda[:N] (default: ENGINE_DEVICE)")


def run(args: argparse.Namespace) -> int:
    import sys
    import time

    import numpy as np

    from engine.data import get_dataset
    from engine.errors import InvalidInputError
    from engine.models import load_classifier
    from engine.selfexplain import KINDS, DecodingSettings, Generator, format_table, self_explain, summarise
    from engine.selfexplain.check import check_prompted

    if args.limit is not None and args.limit < 1:
        raise InvalidInputError(f"--limit must be >= 1, got {args.limit}")
    from engine.selfexplain.field import FIELD_TESTS

    wanted = []
    for k in args.kind:
        wanted += list(KINDS) if k == "all" else list(FIELD_TESTS) if k == "field" else [k]
    kinds = list(dict.fromkeys(wanted))
    classifier = load_classifier(args.model, device=args.device)
    check_prompted(classifier)
    dataset = get_dataset(args.dataset, classifier.meta.split_seed)
    dataset = classifier.check_dataset(dataset)  # labels in the model's class order
    examples = dataset.split(args.split)
    if args.limit is not None and args.limit < len(examples):
        if args.seed is None:
            examples = examples[: args.limit]
        else:
            pick = np.random.default_rng(args.seed).choice(len(examples), size=args.limit, replace=False)
            examples = [examples[i] for i in sorted(pick)]
    settings = (DecodingSettings.published(args.max_new_tokens) if args.decoding == "published"
                else DecodingSettings(max_new_tokens=args.max_new_tokens))
    generator = Generator(classifier, settings, cache=not args.no_cache)
    for kind in kinds:
        started = time.time()
        generated_before = generator.generated

        def progress(done, total, kind=kind):
            print(f"\r{kind}: {done}/{total}", end="", file=sys.stderr, flush=True)

        if kind in FIELD_TESTS:
            run_field_test(args, classifier, dataset, examples, kind, generator, progress, started, generated_before)
            continue

        records = self_explain(classifier, examples, kind, generator=generator, abstain=tuple(args.abstain),
                               only_correct=not args.all_inputs, progress=progress)
        print(file=sys.stderr)
        summary = summarise(records)
        print(format_table(summary, kind))
        print(f"  ({generator.generated - generated_before} generated, the rest from the cache; "
              f"{time.time() - started:.0f} s)\n")
        for r in records[: args.show]:
            print(f"  [{r.verdict}] {r.text!r}\n    predicted {r.prediction}; answer: {r.answer!r}\n"
                  f"    classified again: {r.edited_text!r} -> {r.reclassification} {r.reason}")
        if args.run:
            path = write_results(args, classifier, kind, records, summary, settings, started,
                                 generator.generated - generated_before)
            print(f"  written to {path}")
    return 0


def run_field_test(args, classifier, dataset, examples, kind, generator, progress, started, generated_before) -> None:
    """One of the tests beyond Madsen et al. (engine.selfexplain.field): run, print, and store with --run."""
    import sys
    import time

    from engine.selfexplain.field import FIELD_TESTS, format_field_summary

    test = FIELD_TESTS[kind]
    train = dataset.split("train") if kind == "biased-fewshot" else None
    records = test.run(classifier, examples, generator=generator, progress=progress, seed=args.seed or 0,
                       insertions=args.insertions, permutations=args.permutations, shots=args.shots, train_examples=train)
    print(file=sys.stderr)
    summary = test.summarise(records)
    print(format_field_summary(kind, summary))
    print(f"  ({generator.generated - generated_before} generated, the rest from the cache; {time.time() - started:.0f} s)\n")
    for r in records[: args.show]:
        print(f"  [{r.verdict}] {r.text!r}\n    answer: {r.answer!r} {r.reason}")
    if args.run:
        path = write_field_results(args, classifier, kind, records, summary, generator.settings, started,
                                   generator.generated - generated_before)
        print(f"  written to {path}")


def write_field_results(args, classifier, kind, records, summary, settings, started, generated) -> str:
    """A cell like `write_results`: one row per metric (value, interval, direction of better), every record in the
    provenance."""
    import pandas as pd

    from engine.results.store import ResultsStore
    from engine.selfexplain.field import FIELD_TESTS
    from engine.selfexplain.free_text import why_request
    from engine.settings import results_dir
    from engine.sweeps import provenance

    seed = -1 if args.seed is None else args.seed
    base = {"model": classifier.id, "seed": seed, "dataset": args.dataset, "split": args.split,
            "measure": f"self-explanation {kind}", "strategy": classifier.meta.strategy or "zero-shot",
            "method": "self-explanation", "step": 0, "ratio": float("nan"), "p_value": float("nan")}
    rows = []
    for m in FIELD_TESTS[kind].metrics:
        v = summary.get(m.key)
        lo, hi = summary.get(m.key + "_ci") or (float("nan"), float("nan"))
        rows.append({**base, "metric": m.name, "value": float("nan") if v is None else float(v), "ci_low": lo,
                     "ci_high": hi, "better": m.better, "n_examples": len(records)})
    cell = {k: base[k] for k in ("model", "seed", "dataset", "split", "measure", "method")}
    cell.update(limit=args.limit, decoding=settings.key(), insertions=args.insertions, permutations=args.permutations,
                shots=args.shots)
    meta = classifier.meta
    record = provenance(
        args.command_line, started, classifier, n_examples=len(records), checkpoint_sha256=meta.weights_sha256,
        weights_sha256=meta.weights_sha256, prompt=meta.prompt, decoding=settings.key(),
        requests={"why": why_request("{text}", "{prediction}")}, summary=summary, generated=generated,
        source=FIELD_TESTS[kind].source, records=[r.to_dict() for r in records])
    return str(ResultsStore(results_dir() / SUBSTORE).write_cell(args.run, cell, pd.DataFrame(rows), record))


def write_results(args, classifier, kind, records, summary, settings, started, generated) -> str:
    """One cell of the results store: tidy rows (metric = each verdict's share, the paper's faithfulness, the
    accuracy; ci_low/ci_high), provenance with every record (prompt, answer, intermediate texts)."""
    import pandas as pd

    from engine.results.store import ResultsStore
    from engine.selfexplain.parsing import ATTRIBUTION_PROMPT, COUNTERFACTUAL_PROMPT, REDACTION_PROMPT
    from engine.settings import results_dir
    from engine.sweeps import provenance

    seed = -1 if args.seed is None else args.seed
    base = {"model": classifier.id, "seed": seed, "dataset": args.dataset, "split": args.split,
            "measure": f"self-explanation {kind}", "strategy": classifier.meta.strategy or "zero-shot",
            "method": "self-explanation", "step": 0, "ratio": float("nan"), "p_value": float("nan")}
    rows = []
    for metric in ("faithful", "unfaithful", "not parsable", "faithfulness", "accuracy"):
        lo, hi = summary[metric + "_ci"]
        n = summary["n"] if metric == "accuracy" else summary["n_explained"]
        rows.append({**base, "metric": metric, "value": summary[metric], "ci_low": lo, "ci_high": hi, "n_examples": n})
    cell = {k: base[k] for k in ("model", "seed", "dataset", "split", "measure", "method")}
    cell.update(limit=args.limit, decoding=settings.key(), abstain=list(args.abstain), all_inputs=args.all_inputs)
    meta = classifier.meta
    # The one provenance record (engine.sweeps.provenance), with the recorded hash (no re-hashing of an LLM) also
    # under the name earlier results of this command used.
    record = provenance(
        args.command_line, started, classifier, n_examples=len(records), checkpoint_sha256=meta.weights_sha256,
        weights_sha256=meta.weights_sha256, prompt=meta.prompt, decoding=settings.key(),
        requests={"counterfactual": COUNTERFACTUAL_PROMPT, "attribution": ATTRIBUTION_PROMPT, "redaction": REDACTION_PROMPT},
        summary=summary, generated=generated, records=[r.to_dict() for r in records])
    # A store of its own (results/selfexplain/<run>/), like results/evaluation/: these are not masking curves,
    # and the Benchmarks page and its checks read only the curve runs at the top level.
    return str(ResultsStore(results_dir() / SUBSTORE).write_cell(args.run, cell, pd.DataFrame(rows), record))

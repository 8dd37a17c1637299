"""`python -m engine metrics`: the standard erasure metrics per measure, each beside its MaSF share."""
from __future__ import annotations

import argparse
import sys
import textwrap

from engine.cli.arguments import add_run_argument, add_split_arguments, add_sweep_arguments, sweep_backend
from engine.faithfulness.registry import INFILL_OPERATORS, default_evaluate_families, describe_families, evaluate_families

HELP = ("faithfulness metrics from the metric registry (erasure, soft, F-Fidelity, faithfulness correlation, "
        "infidelity, sensitivity, properties), each with its MaSF share")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
        The standard erasure metrics of importance measures on a fixed ranking (computed once on the unmasked input;
        the gold label is explained), each beside the share of its perturbed inputs that MaSF calls out of
        distribution (p < 0.05), with the direction that is more faithful. Metrics, by family (--metrics takes
        families; engine/faithfulness/registry.py):
        {families}
        Removal replaces a token by [MASK] (default) or deletes it (--operator delete, ERASER's way; labelled), or
        fills it in with another real token (--operator retrieval or mlm, ICE's infill operators).
        --removal is the old name of --operator, kept as an alias for this release.
        One cell per (model, measure, seed) in <results>/evaluation/<run>/, with provenance, wall time per
        explanation and the rows used; cells already there are skipped, so an interrupted run resumes.""").format(
        families=describe_families(evaluate_families()))
    parser.epilog = textwrap.dedent("""\
        examples:
          python -m engine metrics --model tiny-rt-masked-s{seed} --dataset rt --measures random x-grad-sign loo-sign \\
              --seeds 0 1 2 --run tiny-rt-erasure
          python -m engine metrics --model minilm-rt-masked-s0 --dataset rt --measures ig-sign --limit 200 \\
              --metrics comprehensiveness sufficiency --operator delete""")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--model", required=True,
                        help="checkpoint id in models_cache; '{seed}' in it is replaced by each seed "
                             "(e.g. tiny-rt-masked-s{seed})")
    parser.add_argument("--dataset", required=True, help="dataset the checkpoint was trained on (e.g. rt, babi-1)")
    parser.add_argument("--measures", nargs="+", default=[], help="importance measures (e.g. random grad-l2 ig-sign)")
    parser.add_argument("--scores", nargs="+", default=[], metavar="FILE",
                        help="explanations computed elsewhere (CSV, JSON, JSONL; ferret, captum, inseq outputs), "
                             "aligned to the model's tokens by character offsets and evaluated as measures "
                             "'imported:<name>' beside --measures (docs/own-explanations.md). The file must score "
                             "every evaluated example (the first --limit of --split); a row that cannot be matched "
                             "or aligned refuses the file, naming the row")
    parser.add_argument("--scores-name", default=None,
                        help="name of the imported measure (default: the file's measure/explainer field or its stem)")
    defaults = default_evaluate_families()
    parser.add_argument("--metrics", nargs="+", default=defaults, choices=evaluate_families(),
                        help=f"metric families (listed above). Default: {' '.join(defaults)}")
    parser.add_argument("--ffid-alpha", type=float, default=0.5,
                        help="F-Fidelity: removal probability of each token of the set (capped by beta). Default: 0.5")
    parser.add_argument("--ffid-beta", type=float, default=1.0,
                        help="F-Fidelity: removal ratio the model was fine-tuned with; 1 for this project's masked "
                             "fine-tuning (random ratios up to 100%%), 0.1 for the paper's preset. Default: 1")
    parser.add_argument("--ffid-draws", type=int, default=50, help="F-Fidelity: draws per level. Default: 50")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0],
                        help="seeds: of the checkpoint when --model has '{seed}', of `random` and of the soft draws. "
                             "Default: 0")
    add_split_arguments(parser)
    parser.add_argument("--operator", "--removal", dest="operator", default="mask",
                        choices=["mask", "delete", *INFILL_OPERATORS],
                        help="the removal operator: replace removed tokens by [MASK] (default), delete them, or fill "
                             "them in with another real token: 'retrieval' (drawn from the tokens of the model's "
                             "training data) or 'mlm' (the packaged tiny encoder's masked-LM guess; models with its "
                             "vocabulary), so the text keeps its length; the MaSF share of the rows then says whether "
                             "infill stays in distribution (engine/faithfulness/infill.py). --removal: its old name, "
                             "an alias kept for this release")
    parser.add_argument("--whole-words", action="store_true",
                        help="whole-word units: k%%, curve ratios and flips count words, a word's pieces are removed "
                             "together (it ranks by the sum of its pieces' scores; random by one draw per word); the "
                             "soft metrics stay per token. Labelled in the rows' removal column ('mask, whole words')")
    parser.add_argument("--naopc", action="store_true",
                        help="also naopc-comprehensiveness beside aopc-comprehensiveness: normalised per input by the "
                             "worst and best AOPC over all masking orders (Edin et al. 2025); exact up to 12 tokens "
                             "(2^N forwards), beam of width 5 beyond (~5 N^2 forwards per input)")
    parser.add_argument("--soft-draws", type=int, default=5, help="Bernoulli draws of the soft metrics. Default: 5")
    parser.add_argument("--batch-size", type=int, default=32, help="inputs explained per batch. Default: 32")
    parser.add_argument("--agreement", action="store_true",
                        help="also store the agreement between every pair of measures (Krishna et al.: feature, rank, "
                             "sign, signed-rank agreement at top 20%%, Spearman, pairwise rank agreement), per seed")
    add_run_argument(parser, "evaluation")
    add_sweep_arguments(parser, workers_default="1")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from engine.errors import InvalidInputError
    from engine.faithfulness.evaluation import (
        AgreementCell,
        EvaluationCell,
        evaluation_store,
        evaluation_table,
        run_suite,
    )
    from engine.importance import MEASURES
    from engine.models import checkpoint

    backend = sweep_backend(args)
    if getattr(args, "scores", None) and backend.kind != "process":
        # Imported scores are registered in this process's measure registry, which workers do not share.
        raise InvalidInputError("--scores runs in this process: drop --workers / --ray, or evaluate the imported "
                                "scores in a run of their own")
    measures = list(args.measures)
    options: dict[str, tuple] = {}
    for path in getattr(args, "scores", None) or []:
        for mid, digest in _import(args, path).items():
            measures.append(mid)
            options[mid] = (("file_sha256", digest),)
    if not measures:
        raise InvalidInputError("nothing to evaluate: give --measures and/or --scores FILE")
    args.measures = measures
    unknown = [m for m in args.measures if m not in MEASURES]
    if unknown:
        raise InvalidInputError(f"unknown measure(s) {', '.join(unknown)}; known: {', '.join(MEASURES)}")
    if args.soft_draws < 1:
        raise InvalidInputError(f"--soft-draws must be >= 1, got {args.soft_draws}")
    ffid = "f-fidelity" in args.metrics
    if ffid and (args.operator != "mask" or args.whole_words):
        raise InvalidInputError("f-fidelity removes single tokens by [MASK]: drop --operator delete (--removal delete) "
                                "/ --whole-words")
    from engine.faithfulness.registry import FAMILIES, function_families

    wrong = [m for m in args.metrics if "*" not in FAMILIES[m].operators and args.operator not in FAMILIES[m].operators]
    if wrong:  # refused before any work, as the cell would refuse it
        raise InvalidInputError(f"{', '.join(wrong)} cannot remove by {args.operator!r}: use --operator "
                                f"{' or '.join(FAMILIES[wrong[0]].operators)}")
    if args.whole_words and any(m in function_families() for m in args.metrics):
        raise InvalidInputError(f"{', '.join(m for m in args.metrics if m in function_families())} score(s) tokens, "
                                f"not whole words: drop --whole-words")
    cells = []
    for seed in args.seeds:
        model_id = args.model.format(seed=seed)
        checkpoint.validate_model(model_id)  # fail before any work
        if ffid:
            _check_masked(model_id)
        for measure in args.measures:
            cells.append(EvaluationCell(model=model_id, dataset=args.dataset, measure=measure, seed=seed,
                                        split=args.split, limit=args.limit, removal=args.operator,
                                        whole_words=args.whole_words,
                                        naopc=getattr(args, "naopc", False),
                                        metrics=tuple(args.metrics), soft_draws=args.soft_draws,
                                        options=options.get(measure, ()),
                                        ffidelity=(("alpha", args.ffid_alpha), ("beta", args.ffid_beta),
                                                   ("draws", args.ffid_draws)) if "f-fidelity" in args.metrics
                                        else ()))
        if args.agreement and len(args.measures) > 1:
            cells.append(AgreementCell(model=model_id, dataset=args.dataset, measures=tuple(args.measures), seed=seed,
                                       split=args.split, limit=args.limit))
    command = getattr(args, "command_line", None) or "python -m engine metrics " + " ".join(sys.argv[1:])
    store = evaluation_store()
    with tqdm(total=len(cells), desc=f"metrics {args.run}", unit="cell") as bar:
        bar.update(sum(store.has_cell(args.run, c.key()) for c in cells))

        def within(cell, done, total):
            bar.set_postfix_str(f"{cell.model} {cell.measure}: {done}/{total} examples")

        report = run_suite(cells, run=args.run, command=command, progress=lambda i, n, key: bar.update(1),
                           cell_progress=within, backend=backend, batch_size=args.batch_size)
    print(f"{len(report.done)} cells computed, {len(report.skipped)} already in the store, {len(report.failed)} failed "
          f"-> {store.root / args.run}")
    for key, error in report.failed:
        print(f"  failed {key['model']} {key['measure']} seed {key['seed']}: {error}", file=sys.stderr)
    table = evaluation_table(store.load(args.run).query("method == 'erasure'"))
    if not table.empty:
        aggregates = table[table["level"].isna()]
        wide = aggregates.pivot_table(index="measure", columns="metric", values="value")
        # a property of the scores perturbs nothing: its share is NaN, a column pivot_table would drop
        share = aggregates.pivot_table(index="measure", columns="metric", values="p_below_005",
                                       dropna=False).reindex(index=wide.index, columns=wide.columns)
        print("mean over seeds (MaSF share p<0.05 in brackets); better: " + ", ".join(
            f"{m} {aggregates[aggregates.metric == m]['better'].iloc[0]}" for m in wide.columns))
        width = max(14, *(len(str(m)) + 1 for m in wide.index))  # imported measures have long names
        for measure, row in wide.iterrows():
            print(f"  {measure:<{width}}" + "  ".join(f"{m} {row[m]:.3f} [{_share(share.loc[measure, m])}]" for m in wide.columns))
    return 1 if report.failed else 0


def _share(value: float) -> str:
    """A MaSF share for the summary line: 'n/a' where nothing was perturbed (a property of the scores)."""
    return "n/a" if value != value else f"{value:.0%}"


def _import(args: argparse.Namespace, path: str) -> dict[str, str]:
    """Read, match and align a scores file against the first seed's checkpoint and the evaluated examples (every
    row checked before any work); returns {measure id: file digest}."""
    from engine.data import get_dataset
    from engine.errors import InvalidInputError
    from engine.importance.imported import import_scores, target_index
    from engine.models import load_classifier

    classifier = load_classifier(args.model.format(seed=args.seeds[0]))
    dataset = get_dataset(args.dataset, classifier.meta.split_seed)
    examples = dataset.split(args.split)
    registered = import_scores(path, examples, classifier, name=args.scores_name, split=args.split)
    from engine.importance import MEASURES

    for mid in registered:
        for row, ex, _spans in MEASURES[mid].pairs:  # `metrics` explains the gold label: so must the file
            wanted = target_index(row.target, classifier.classes)
            if wanted is not None and wanted != ex.label:
                raise InvalidInputError(f"{path}, {row.where}: it explains class {classifier.classes[wanted]!r} but "
                                        f"`metrics` explains the gold label {classifier.classes[ex.label]!r}")
        scored = {ex.primary for _row, ex, _spans in MEASURES[mid].pairs}  # duplicates of a text share its scores
        missing = [e.uid for e in examples[: args.limit] if e.primary not in scored]
        if missing:
            raise InvalidInputError(f"{path}: {mid} does not score {len(missing)} of the {len(examples[: args.limit])} "
                                    f"evaluated examples (first: {', '.join(missing[:3])}); score them or pass --limit")
    return registered


def _check_masked(model_id: str) -> None:
    """F-Fidelity needs a model fine-tuned with random removal: this project's masked fine-tuning (strategy
    'masked' in its metadata); refuse others before any work."""
    from engine.errors import InvalidInputError
    from engine.models import checkpoint
    from engine.models.metadata import METADATA_FILE, CheckpointMeta, read_metadata

    folder, _ = checkpoint.model_folders(model_id)
    meta = read_metadata(folder) if (folder / METADATA_FILE).is_file() else CheckpointMeta()
    if meta.strategy != "masked":
        raise InvalidInputError(f"f-fidelity needs a model fine-tuned with random removal (masked fine-tuning); "
                                f"{model_id!r} has strategy {meta.strategy!r}: evaluate a '-masked-' checkpoint")

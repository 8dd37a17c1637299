"""`python -m engine ...`: train models, list models and datasets. Every error a user can cause
(unknown names, broken checkpoints, bad options) ends in one clear line on stderr and exit code 2,
with nothing written."""
from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap

DESCRIPTION = """\
Faithfulness engine: fine-tune classifiers that support masking, and measure whether token-importance
explanations are true to the model. Models are stored in models_cache/ (ENGINE_MODELS_CACHE overrides).
Run `python -m engine COMMAND --help` for each command."""


def _add_train(sub) -> None:
    p = sub.add_parser(
        "train",
        help="fine-tune a classifier (masked fine-tuning by default) and save it to models_cache",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Fine-tune a pretrained encoder on a dataset and save the best epoch to models_cache/<id>/
            (safetensors weights, tokenizer, metadata.json with every hyper-parameter and test metric).

            Strategies (FMM, Madsen et al. 2024):
              masked        half of each mini-batch is masked with a ratio r ~ U(0,1) per input, so the model
                            learns to read [MASK] as "information removed": explanations can then be checked by
                            masking without leaving the training distribution (the default; use this).
              plain         ordinary fine-tuning (ablation): its masked inputs are out of distribution.
              only-masking  every input masked with r ~ U(0,1) (ablation).

            Examples:
              python -m engine train --model tiny --dataset rt                 # ~80 s on 2 CPU cores
              python -m engine train --model minilm --dataset rt --epochs 2 --lr 5e-5
              python -m engine train --model tiny --dataset babi-1 --strategy plain --seed 3
            """),
    )
    p.add_argument("--model", default="tiny", help="encoder to start from: 'tiny' (BERT 2x128, 4.4M params), "
                   "'minilm' (MiniLM-L6, 22.7M), 'bilstm' (BiLSTM-attention on GloVe 50d, trained from scratch), "
                   "a local Hugging Face folder, or a hub id (needs a network). Default: tiny")
    p.add_argument("--dataset", default="rt", help="rt, imdb, babi-1, babi-2, babi-3 or toy (see `python -m engine datasets`). Default: rt")
    p.add_argument("--strategy", default="masked", choices=["masked", "plain", "only-masking"], help="fine-tuning strategy (see above). Default: masked")
    p.add_argument("--epochs", type=int, default=4, help="training epochs; the best on validation is kept. Default: 4")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate of AdamW (linear decay, 6%% warm-up). "
                   "Default: 1e-4 (suits tiny; use 2e-5..5e-5 for larger transformers), 1e-3 for bilstm")
    p.add_argument("--batch-size", type=int, default=32, help="mini-batch size. Default: 32")
    p.add_argument("--max-length", type=int, default=None, help="tokens per input; longer inputs are truncated "
                   "(and flagged). Default: the dataset's (rt 64, imdb 256, bAbI 160-192)")
    p.add_argument("--seed", type=int, default=0, help="seed of initialisation, batch order and masking. Default: 0")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the train/validation/test split. Default: 0")
    p.add_argument("--train-limit", type=int, default=None, help="use only the first N training examples (quick trials)")
    p.add_argument("--eval-limit", type=int, default=None, help="use only the first N validation and test examples (quick trials)")
    p.add_argument("--device", default="auto", help="auto (cuda when available), cpu or cuda. Default: auto")
    p.add_argument("--id", default=None, help="checkpoint id (folder name in models_cache). Default: <model>-<dataset>-<strategy>-s<seed>")
    p.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint with the same id")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_models(sub) -> None:
    p = sub.add_parser("models", help="list the checkpoints in models_cache with their test metrics",
                       description="List every checkpoint in models_cache: dataset, strategy, unmasked and "
                       "100%%-masked test metric, class-majority baseline. Broken folders are listed with the reason.")
    p.add_argument("--json", action="store_true", help="print the full metadata as JSON")


def _add_datasets(sub) -> None:
    p = sub.add_parser("datasets", help="list the datasets with their splits, metric and class-majority baseline",
                       description="List the registered datasets (all offline: packaged CSV or generated).")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the splits to describe. Default: 0")


def _ratios(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"ratios must be comma-separated numbers like 0,0.1,0.5,1, got {text!r}") from None
    return values


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _workers(text: str) -> int:
    """`auto`: on a CPU one local worker process per two cores (each runs two intra-op threads, where a CPU forward
    pass of these models stops gaining from more), so one, in this process, on a 2-core machine; with CUDA one."""
    if text == "auto":
        import torch

        if torch.cuda.is_available():
            return 1  # one process keeps the GPU busy; more would each hold a CUDA context on the same card
        return max(1, (os.cpu_count() or 2) // 2)
    return _positive_int(text)


def _add_masf(sub) -> None:
    p = sub.add_parser("masf", help="fit the MaSF in-distribution test of a checkpoint and store it beside it",
                       description="Fit MaSF (REFERENCE section 4) on the checkpoint's validation split transformed like "
                       "its training, store it in models_cache/<id>/masf.safetensors, and report the share of p-values "
                       "below 0.05 on the test split unmasked and 100%% masked.")
    p.add_argument("--model", required=True, help="checkpoint id in models_cache (see `python -m engine models`)")
    p.add_argument("--limit", type=int, default=None, help="use only the first N validation inputs")


def _add_faithfulness(sub) -> None:
    p = sub.add_parser(
        "faithfulness", help="recursive masking of one text or a dataset split by an importance measure",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Recursive masking without retraining (FMM Alg. 3): at each step the measure explains the partly
            masked input and the top floor(r * N) tokens in total are masked. A faithful measure makes the
            model's confidence fall faster than random masking does. With a text, prints every step (masked
            text, probability of the target class, MaSF p-value); without, runs a dataset split (gold labels)
            and prints the metric per step.

            Examples:
              python -m engine faithfulness --model tiny-rt-masked-s0 --measure loo-sign --text "a gorgeous, witty film"
              python -m engine faithfulness --model tiny-rt-masked-s0 --measure grad-l2 --limit 200
            """))
    p.add_argument("--model", required=True, help="checkpoint id in models_cache")
    p.add_argument("--measure", required=True, help="importance measure (see `python -m engine explain --help`)")
    p.add_argument("--text", default=None, help="one input to mask step by step; omit to run a dataset split")
    p.add_argument("--aux", default=None, help="auxiliary sequence (the question of a paired task)")
    p.add_argument("--target", type=int, default=None, help="class to track (default: the predicted class for a text)")
    schedule = p.add_mutually_exclusive_group()
    schedule.add_argument("--ratios", type=_ratios, default=None,
                          help="comma-separated masking ratios starting at 0 (default 0,0.1,...,1)")
    schedule.add_argument("--counts", type=_positive_int, default=None, metavar="N",
                          help="count mode: mask 0, 1, ..., N tokens (capped at each input's length) instead of ratios")
    p.add_argument("--split", default="test", help="dataset split when no --text (default test)")
    p.add_argument("--limit", type=int, default=None, help="only the first N examples of the split")
    p.add_argument("--seed", type=int, default=0, help="seed of the random measure (default 0)")
    p.add_argument("--random-seeds", type=_positive_int, default=5,
                   help="with --text: the random baseline's curves, seeds 0..N-1, averaged (default 5)")


def _add_benchmark(sub) -> None:
    p = sub.add_parser(
        "benchmark", help="sweep checkpoints x datasets x measures x seeds into the results store (resumable)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Run recursive-masking curves for every cell (checkpoint x dataset x measure x seed) and write tidy rows
            with provenance to results/<run>/ (ENGINE_RESULTS_DIR overrides). Cells already there are skipped, so
            an interrupted sweep resumes. Seeds pick checkpoints through --model-template (FMM: one fine-tuned model
            per seed) and seed the random baseline. Always include `random`: ACU/RACU compare against it, over the
            same examples, so one run can hold the whole split and a subset for an expensive measure (beam).

            Examples:
              python -m engine benchmark --datasets rt --measures random grad-l2 loo-sign --seeds 0 1 2 --limit 200
              python -m engine benchmark --datasets rt --measures random loo-sign beam --seeds 0 1 2 --limit 20   # same run
              python -m engine benchmark --datasets rt --measures random loo-sign --seeds 0 1 2 --counts 10 --run rt-counts
            """))
    p.add_argument("--model-template", default="tiny-{dataset}-masked-s{seed}",
                   help="checkpoint id per (dataset, seed). Default: tiny-{dataset}-masked-s{seed}")
    p.add_argument("--datasets", nargs="+", required=True)
    p.add_argument("--measures", nargs="+", required=True)
    p.add_argument("--seeds", nargs="+", type=int, default=[0],
                   help="seeds (default 0). CIs are over seeds: one seed gives none; FMM used 5, at least 3 is usual")
    p.add_argument("--run", default="default", help="name of the run folder in the results store (default: default)")
    p.add_argument("--split", default="test")
    p.add_argument("--limit", type=int, default=None, help="only the first N examples of each split")
    schedule = p.add_mutually_exclusive_group()
    schedule.add_argument("--ratios", type=_ratios, default=None, help="comma-separated masking ratios (default 0,0.1,...,1)")
    schedule.add_argument("--counts", type=_positive_int, default=None, metavar="N",
                          help="count mode: mask 0, 1, ..., N tokens per input (capped at its length) instead of ratios; "
                               "ACU then integrates over k / N")
    p.add_argument("--workers", type=_workers, default="auto",
                   help="local worker processes: a number, or 'auto' (the default): on a CPU one per two cores, each with "
                        "two threads (on a 2-core machine one, in this process, which also shows the examples done per "
                        "cell); with a GPU one")
    p.add_argument("--ray", default=None, metavar="ADDRESS", help="run cells on Ray: 'auto', an address, or 'local' (needs `pip install ray`)")


def _add_attention(sub) -> None:
    p = sub.add_parser(
        "attention", help="W&P's attention diagnostics on the BiLSTM-attention model, into the results store",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Wiegreffe & Pinter 2019, "Attention is not not Explanation", on the BiLSTM with additive attention:
            the uniform-attention baseline, seed variance (JSD of attention, TVD of predictions over --seeds
            models), the diagnostic MLP guided by uniform / trained / base-LSTM / adversarial weights, and the
            model-consistent adversary over a lambda sweep. Missing seed models are trained (plain fine-tuning)
            and saved in models_cache; results go to results/attention/<run>/.

            Example (about 20 minutes on 2 cores):
              python -m engine attention --dataset rt --seeds 8 --lambdas 0.001 0.01 0.03 0.1 0.3
            """))
    p.add_argument("--dataset", default="rt", help="binary datasets give W&P's positive-class F1. Default: rt")
    p.add_argument("--seeds", type=int, default=8, help="models with seeds 0..N-1 (seed 0 is the base). Default: 8")
    p.add_argument("--lambdas", nargs="+", type=float, default=[0.001, 0.01, 0.03, 0.1, 0.3], help="adversary lambda sweep")
    p.add_argument("--epochs", type=int, default=6, help="epochs of each BiLSTM. Default: 6")
    p.add_argument("--adversary-epochs", type=int, default=3)
    p.add_argument("--mlp-epochs", type=int, default=4)
    p.add_argument("--run", default="default", help="results/attention/<run>/. Default: default")


def _add_roar(sub) -> None:
    p = sub.add_parser(
        "roar", help="ROAR / Recursive ROAR with retraining: one curve per measure, seed and method (resumable)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Mask the tokens a measure ranks highest in the train, validation and test splits and retrain a
            fresh model at each level (R-ROAR, Madsen et al. 2022). `recursive-roar`: the model retrained at
            the previous level explains the already-masked data; `roar` (Hooker et al. 2019): the level-0
            model's ranking is used for every level. The level-0 model of each seed is trained once and saved
            in models_cache (or reused when one with the same config is there). Writes tidy rows with
            provenance to results/<run>/; cells already there are skipped. Include `random`: RACU compares
            against it. Cost: one training per level, measure, method and seed (see the README for timings).

            Example (R-ROAR appendix C.1 BiLSTM-attention on rt, 3 seeds):
              python -m engine roar --model bilstm --dataset rt --strategy plain --measures random attention grad-l2 \\
                  --seeds 0 1 2 --epochs 4 --lr 1e-3 --run bilstm-rt-roar
            """))
    p.add_argument("--model", default="bilstm", help="encoder: bilstm (default), tiny, minilm or a local folder")
    p.add_argument("--dataset", default="rt", help="dataset (see `python -m engine datasets`). Default: rt")
    p.add_argument("--strategy", default="plain", choices=["masked", "plain", "only-masking"],
                   help="fine-tuning strategy of every model. Default: plain (as in R-ROAR)")
    p.add_argument("--measures", nargs="+", required=True, help="importance measures; include random")
    p.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds (one level-0 model each). Default: 0")
    p.add_argument("--methods", nargs="+", default=["recursive-roar", "roar"], choices=["recursive-roar", "roar"],
                   help="which curves. Default: both")
    p.add_argument("--levels", default="quantile", choices=["quantile", "count"],
                   help="quantile: 10%%..90%% of each input's maskable tokens; count: 1..10 tokens. Default: quantile")
    p.add_argument("--steps", type=_ratios, default=None, metavar="LEVELS",
                   help="comma-separated levels instead of the defaults (fractions for quantile, counts for count)")
    p.add_argument("--epochs", type=int, default=4, help="epochs of every training. Default: 4")
    p.add_argument("--lr", type=float, default=None, help="learning rate. Default: 1e-3 for bilstm, else the train default")
    p.add_argument("--batch-size", type=int, default=32, help="mini-batch size. Default: 32")
    p.add_argument("--train-limit", type=int, default=None, help="only the first N training examples (quick trials)")
    p.add_argument("--eval-limit", type=int, default=None, help="only the first N validation and test examples")
    p.add_argument("--run", default="roar", help="results/<run>/. Default: roar")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_train(sub)
    _add_models(sub)
    _add_datasets(sub)
    _add_masf(sub)
    _add_faithfulness(sub)
    _add_benchmark(sub)
    _add_attention(sub)
    _add_roar(sub)
    for module in ("engine.importance.command", "engine.plausibility.command"):
        try:
            __import__(module, fromlist=["register"]).register(sub)
        except ModuleNotFoundError as err:
            if not module.startswith(err.name or "\0"):
                raise  # a missing dependency inside the module is a real error, not an absent part

    return parser


def cmd_train(args) -> int:
    from engine.data import get_dataset
    from engine.models import TrainConfig, checkpoint, default_model_id, resolve_encoder, save_classifier, train_classifier

    config = TrainConfig(
        base_model=args.model, dataset=args.dataset, strategy=args.strategy, epochs=args.epochs,
        lr=args.lr if args.lr is not None else (1e-3 if args.model == "bilstm" else 1e-4),
        batch_size=args.batch_size, max_length=args.max_length, seed=args.seed, split_seed=args.split_seed,
        train_limit=args.train_limit, eval_limit=args.eval_limit, device=args.device,
    )
    model_id = checkpoint.check_model_id(args.id or default_model_id(config))
    target = checkpoint.models_cache_dir() / model_id
    # Check everything that can be checked before spending minutes on training.
    if target.exists() and not args.overwrite:
        raise FileExistsError(f"checkpoint {model_id!r} exists at {target}; pass --overwrite or choose another --id")
    get_dataset(args.dataset, args.split_seed)
    resolve_encoder(args.model)
    classifier = train_classifier(config, show_progress_bar=not args.quiet)
    folder = save_classifier(classifier, model_id, overwrite=args.overwrite)
    t = classifier.metadata["test"]
    print(f"saved {folder}")
    print(f"test {classifier.metadata['metric']}: unmasked {t['unmasked']:.4f}, 100% masked {t['masked_100']:.4f} "
          f"(accuracy {t['masked_100_accuracy']:.4f}, 95% CI {t['masked_100_accuracy_ci95'][0]:.4f}-"
          f"{t['masked_100_accuracy_ci95'][1]:.4f}), class-majority baseline {t['majority_baseline']:.4f}; "
          f"best epoch {classifier.metadata['best_epoch']}, {classifier.metadata['train_seconds']:.0f} s")
    return 0


def cmd_models(args) -> int:
    from engine.models import list_checkpoints, models_cache_dir

    rows = list_checkpoints()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no checkpoints in {models_cache_dir()}; train one with `python -m engine train --model tiny --dataset rt`")
        return 0
    print(f"{'id':34} {'dataset':8} {'strategy':12} {'metric':9} {'unmasked':>8} {'100%mask':>8} {'majority':>8} {'epoch':>5}")
    for m in rows:
        if "error" in m:
            print(f"{m['id']:34} BROKEN: {m['error']}")
            continue
        t = m.get("test", {})
        fmt = lambda v: f"{v:8.4f}" if isinstance(v, (int, float)) else f"{'-':>8}"  # noqa: E731
        print(f"{m['id']:34} {m['dataset']:8} {m['strategy']:12} {m.get('metric', '-'):9} {fmt(t.get('unmasked'))} "
              f"{fmt(t.get('masked_100'))} {fmt(t.get('majority_baseline'))} {m.get('best_epoch', '-')!s:>5}")
    return 0


def cmd_datasets(args) -> int:
    from engine.data import DATASET_NAMES, get_dataset

    for name in DATASET_NAMES:
        s = get_dataset(name, args.split_seed).summary()
        sizes = "/".join(str(s["sizes"][k]) for k in ("train", "validation", "test"))
        print(f"{name:8} {s['metric']:9} classes={len(s['classes'])} train/val/test={sizes:16} "
              f"majority baseline {s['majority_baseline_test']:.3f}  {'paired' if s['paired'] else 'single'}  "
              f"max_length={s['max_length']}")
    return 0


def cmd_masf(args) -> int:
    import numpy as np

    from engine.data import get_dataset
    from engine.models import load_classifier, mask_all_primary
    from engine.ood import fit_masf, hidden_state_features

    classifier = load_classifier(args.model)
    masf = fit_masf(classifier, limit=args.limit)
    meta = classifier.metadata
    test = get_dataset(meta["dataset"], meta.get("split_seed", 0)).split("test")[:500]
    for label, full in (("unmasked", False), ("100% masked", True)):
        p = []
        for start in range(0, len(test), 64):
            batch = classifier.batch_of(test[start : start + 64])
            if full:
                batch = mask_all_primary(batch, classifier.mask_token_id)
            p.append(masf.pvalues(hidden_state_features(classifier, batch)))
        p = np.concatenate(p)
        print(f"{label:12} test inputs: {np.mean(p < 0.05):6.1%} with p < 0.05 (n={len(p)})")
    print(f"stored {classifier.folder / 'masf.safetensors'}")
    return 0


def _explainer(name, classifier, seed):
    from engine.importance import get_explainer

    return get_explainer(name, classifier, **({"seed": seed} if name == "random" else {}))


def cmd_faithfulness(args) -> int:
    from tqdm import tqdm

    from engine.data import get_dataset
    from engine.faithfulness.recursive import dataset_masking_curve
    from engine.models import load_classifier
    from engine.ood import fit_masf, load_masf

    classifier = load_classifier(args.model)
    masf = load_masf(classifier) or fit_masf(classifier)
    counts = list(range(0, args.counts + 1)) if args.counts else None
    if args.text is not None:
        from engine.faithfulness.metrics import acu, racu
        from engine.faithfulness.single import mask_single_input

        options = {"seed": args.seed} if args.measure == "random" else {}
        shown = mask_single_input(classifier, args.text, args.measure, args.aux, ratios=None if counts else args.ratios,
                                  counts=counts, random_seeds=range(args.random_seeds), masf=masf, target=args.target,
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
    explainer = _explainer(args.measure, classifier, args.seed)
    meta = classifier.metadata
    dataset = get_dataset(meta["dataset"], meta.get("split_seed", 0))
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


def cmd_benchmark(args) -> int:
    import os

    from tqdm import tqdm

    from engine.faithfulness.benchmark import Cell, run_sweep
    from engine.models import checkpoint
    from engine.results import ResultsStore

    cells = []
    for dataset in args.datasets:
        for seed in args.seeds:
            model_id = args.model_template.format(dataset=dataset, seed=seed)
            checkpoint.validate_checkpoint(checkpoint.checkpoint_dir(model_id))  # fail before any work
            for measure in args.measures:
                if args.counts is not None:
                    schedule = {"ratios": (), "counts": tuple(range(0, args.counts + 1))}
                else:
                    schedule = {"ratios": tuple(args.ratios) if args.ratios else Cell.ratios}
                cells.append(Cell(model=model_id, dataset=dataset, measure=measure, seed=seed, split=args.split,
                                  limit=args.limit, **schedule))
    os.environ["ENGINE_COMMAND"] = "python -m engine " + " ".join(sys.argv[1:])
    store = ResultsStore()
    with tqdm(total=len(cells), desc=f"benchmark {args.run}", unit="cell") as bar:
        bar.update(sum(store.has_cell(args.run, cell.key()) for cell in cells))  # a resumed sweep starts where it was
        def within(cell, done, total):  # one process: say how far the running cell is (a cell may take an hour)
            bar.set_postfix_str(f"{cell.measure} seed {cell.seed}: {done}/{total} examples")

        report = run_sweep(cells, run=args.run, workers=args.workers, ray_address=args.ray,
                           progress=lambda i, total, key: bar.update(1), cell_progress=within)
    print(f"{len(report.done)} cells computed, {len(report.skipped)} already in the store, {len(report.failed)} failed "
          f"-> {store.root / args.run}")
    for key, error in report.failed:
        print(f"  failed {key['model']} {key['measure']} seed {key['seed']}: {error}", file=sys.stderr)
    _print_area_table(args.run)
    return 1 if report.failed else 0


def cmd_attention(args) -> int:
    import os

    from engine.attention.runner import run_attention_diagnostics

    os.environ["ENGINE_COMMAND"] = "python -m engine " + " ".join(sys.argv[1:])
    out = run_attention_diagnostics(args.dataset, args.seeds, args.lambdas, args.epochs, args.adversary_epochs,
                                    args.mlp_epochs, args.run, log=lambda m: print(f"== {m}", flush=True))
    print(f"wrote {out}")
    return 0


def cmd_roar(args) -> int:
    import os

    from tqdm import tqdm

    from engine.faithfulness.retraining import run_retraining_sweep
    from engine.models import TrainConfig

    lr = args.lr or (1e-3 if args.model == "bilstm" else 1e-4)
    config = TrainConfig(base_model=args.model, dataset=args.dataset, strategy=args.strategy, epochs=args.epochs, lr=lr,
                         batch_size=args.batch_size, train_limit=args.train_limit, eval_limit=args.eval_limit)
    levels = None
    if args.steps:
        levels = [x for x in args.steps if x > 0]
        if args.levels == "count":
            levels = [int(x) for x in levels]
    os.environ["ENGINE_COMMAND"] = "python -m engine " + " ".join(sys.argv[1:])
    bar = tqdm(desc="trainings", unit="model")

    def progress(info):
        bar.total = info["trainings_total"]
        bar.n = info["trainings_done"]
        bar.set_postfix_str(f"{info['measure']} seed {info['seed']} level {info['level']}: {info['value']:.3f}")
        bar.refresh()

    report = run_retraining_sweep(config, args.measures, args.seeds, methods=args.methods, strategy=args.levels,
                                  levels=levels, run=args.run, log=lambda m: tqdm.write(f"== {m}"), progress=progress)
    bar.close()
    print(f"{len(report['done'])} curves computed, {len(report['skipped'])} already in the store")
    _print_area_table(args.run)
    return 0


def _print_area_table(run: str) -> None:
    """ACU / RACU (mean over seeds, 95% BCa CI) of every method and measure in the run, as markdown."""
    import pandas as pd

    from engine.faithfulness.summary import area_metrics_table
    from engine.results import ResultsStore

    try:
        table = area_metrics_table(ResultsStore().load(run))
    except ValueError as err:  # e.g. two checkpoints for one seed: the cells are written, only the summary fails
        print(f"warning: no ACU/RACU table for run {run!r}: {err}", file=sys.stderr)
        return
    if table.empty:
        return
    def interval(low, high, used):
        return f"{low:.1f} to {high:.1f}" if pd.notna(low) else f"no CI: {used}"

    several_grids = table["grid"].nunique() > 1
    several_splits = table["split"].nunique() > 1  # ResultsStore.load gives every row a split
    print("\n| dataset | model | method | examples | measure | seeds | ACU % (95% CI) | RACU % (95% CI) | RACU clipped % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in table.itertuples():
        examples = "whole splits" if pd.isna(r.n_examples) else int(r.n_examples)
        method = r.method if r.schedule in ("ratio", "quantile") else f"{r.method} ({r.schedule} tokens: x = k / k_max)"
        if several_grids:  # the run masked on more than one list of levels: each is its own comparison
            method += f" (levels {r.grid})"
        if several_splits:
            examples = f"{examples} ({r.split})"
        print(f"| {r.dataset} | {r.base_model} | {method} | {examples} | {r.measure} | {r.seeds} | {r.acu_pct:.1f} "
              f"({interval(r.acu_low, r.acu_high, r.acu_ci)}) | {r.racu_pct:.1f} ({interval(r.racu_low, r.racu_high, r.racu_ci)}) | "
              f"{r.racu_clipped_pct:.1f} |")


COMMANDS = {"attention": cmd_attention, "train": cmd_train, "models": cmd_models, "datasets": cmd_datasets, "masf": cmd_masf,
            "faithfulness": cmd_faithfulness, "benchmark": cmd_benchmark, "roar": cmd_roar}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    from engine.data import UnknownDatasetError
    from engine.models import CheckpointError, EmptyInputError, LabelMismatchError, TrainingCancelled, UnknownModelError

    user_errors = (UnknownDatasetError, UnknownModelError, CheckpointError, LabelMismatchError, EmptyInputError,
                   FileExistsError, ValueError)
    try:
        handler = getattr(args, "func", None) or COMMANDS[args.command]
        return handler(args)
    except user_errors as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, TrainingCancelled):
        print("interrupted: nothing was saved", file=sys.stderr)
        return 130

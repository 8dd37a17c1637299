"""`python -m engine simulability`: scaffolded students and learned head-weighted explanations (SMaT)."""
from __future__ import annotations

import argparse
import textwrap

from engine.cli.arguments import add_sweep_arguments

HELP = "simulability: train students to simulate a frozen teacher, scaffolded by its explanations (SMaT)"

EXPLAINER_CHOICES = ("none", "grad-l2", "x-grad-sign", "ig-sign", "attention-all", "attention-last", "smat", "oracle",
                     "random")  # engine.simulability.explainers.EXPLAINERS (not imported here: no heavy imports)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = textwrap.dedent("""\
        Simulability (Fernandes et al. 2022, "Learning to Scaffold"): a student learns to predict what a frozen
        teacher predicts from a small budget of examples; an explanation is good if scaffolding the student
        with it (an extra KL term towards the teacher's token distribution) raises the student's simulation
        accuracy on the test split. SMaT learns the teacher's explainer (sparse weights over all attention
        heads) by one-step look-ahead meta-learning; it is then stored beside the checkpoint as the
        importance measure `smat`.

        Explainers: none, grad-l2, x-grad-sign, ig-sign (this project's measures, softmax over the maskable
        tokens), attention-all, attention-last (attention logits of all heads / of the last layer's heads,
        averaged), smat (learned), and the controls oracle (gold rationales, bAbI only) and random.

        Each (explainer, budget, seed) is one cell in <results>/simulability/<run>/ with its provenance;
        finished cells are skipped, so an interrupted run resumes. Ctrl-C stops after the current step (in one
        process; --workers / --ray train the students in parallel, with the same numbers).
        Small models run fastest with one thread on a shared CPU: ENGINE_THREADS=1.

        Examples:
          python -m engine simulability --teacher minilm-rt-masked-s0 --student tiny --dataset rt \\
              --budgets 250 500 1000 --seeds 0 1 2 \\
              --explainers none grad-l2 x-grad-sign ig-sign attention-all attention-last smat
          python -m engine simulability --teacher tiny-babi-1-masked-s0 --budgets 250 --seeds 0 \\
              --explainers none oracle random attention-all smat
        """)
    parser.add_argument("--teacher", required=True, help="checkpoint id in models_cache (or a checkpoint folder): "
                        "the frozen teacher, a BERT-like transformer")
    parser.add_argument("--student", default="tiny", help="encoder the student starts from (pretrained, fresh head): "
                        "tiny, minilm or a local Hugging Face folder sharing the teacher's vocabulary. Default: tiny")
    parser.add_argument("--dataset", default=None, help="dataset (default: the teacher's)")
    parser.add_argument("--budgets", type=int, nargs="+", default=[250, 500, 1000],
                        help="training examples the student sees. Default: 250 500 1000")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="student seeds. Default: 0 1 2")
    parser.add_argument("--explainers", nargs="+", default=["none", "grad-l2", "x-grad-sign", "ig-sign",
                        "attention-all", "attention-last", "smat"], choices=EXPLAINER_CHOICES, metavar="EXPLAINER",
                        help=f"teacher explainers, among {', '.join(EXPLAINER_CHOICES)}. Default: all but the controls")
    parser.add_argument("--run", default=None, help="run name in the store. Default: <teacher>-<dataset>")
    parser.add_argument("--max-epochs", type=int, default=40, help="epoch cap per student. Default: 40")
    parser.add_argument("--patience", type=int, default=10, help="epochs without a better validation simulability "
                        "before stopping (SMaT: 10). Default: 10")
    parser.add_argument("--beta", type=float, default=None, help="weight of the explanation KL. Default: the "
                        "explainer family's (5 attention, 0.2 gradient, as SMaT)")
    parser.add_argument("--teacher-lr", type=float, default=5e-4, help="Adam learning rate of the teacher's head "
                        "weights (SMaT searched 2e-4..5e-3). Default: 5e-4")
    parser.add_argument("--validation-limit", type=int, default=500, help="validation examples (early stopping and "
                        "SMaT's outer loss). Default: 500")
    parser.add_argument("--test-limit", type=int, default=None, help="test examples for simulation accuracy. "
                        "Default: the whole test split")
    parser.add_argument("--pool-size", type=int, default=None, help="training examples the budgets are drawn from "
                        "(per seed, nested). Default: 2 x the largest budget")
    parser.add_argument("--plausibility-limit", type=int, default=200, help="bAbI test stories for the sentence-level "
                        "AUC against supporting facts (0: none). Default: 200")
    parser.add_argument("--no-save-weights", action="store_true", help="do not store the learned head weights beside "
                        "the teacher checkpoint (the `smat` measure reads them)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_sweep_arguments(parser)


def run(args: argparse.Namespace) -> int:
    import signal
    import time

    from tqdm.auto import tqdm

    from engine.cli.sweep_report import print_sweep_report
    from engine.simulability.runner import run_simulability
    from engine.simulability.training import StudentConfig

    config = StudentConfig(max_epochs=args.max_epochs, patience=args.patience, beta=args.beta,
                           teacher_lr=args.teacher_lr)
    bar = tqdm(total=0, unit="step", desc="simulability", disable=args.quiet, dynamic_ncols=True)
    stop = {"asked": False}

    def ask_stop(signum, frame):  # the first Ctrl-C stops cleanly after the current step; a second one kills
        if stop["asked"]:
            raise KeyboardInterrupt
        stop["asked"] = True
        bar.write("stopping after the current step (finished cells are kept); Ctrl-C again to kill")

    def progress(done, total):
        bar.total = total
        bar.n = done
        bar.refresh()

    started = time.time()
    previous = signal.signal(signal.SIGINT, ask_stop)
    try:
        report = run_simulability(
            args.teacher, student=args.student, dataset=args.dataset, budgets=args.budgets, seeds=args.seeds,
            explainers=args.explainers, run=args.run, config=config, validation_limit=args.validation_limit,
            test_limit=args.test_limit, pool_size=args.pool_size, plausibility_limit=args.plausibility_limit,
            command=getattr(args, "command_line", "python -m engine simulability"),
            save_head_weights=not args.no_save_weights, progress=progress, status=bar.write if not args.quiet else None,
            should_stop=lambda: stop["asked"], workers=args.workers, ray=args.ray)
    finally:
        signal.signal(signal.SIGINT, previous)
        bar.close()
    print_sweep_report(report, "cells", f"run {report.run}, {time.time() - started:.0f} s")
    _print_table(report.run)
    return 1 if report.failed else 0


def _print_table(run: str) -> None:
    from engine.simulability.results import load_simulability, simulation_table

    data = load_simulability(run)
    if data.empty:
        return
    print(simulation_table(data).to_string())

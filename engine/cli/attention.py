"""`python -m engine attention`: W&P's attention diagnostics on the BiLSTM-attention model."""
from __future__ import annotations

import argparse
import textwrap

from engine.cli.arguments import add_sweep_arguments

HELP = "W&P's attention diagnostics on the BiLSTM-attention model, into the results store"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
            Wiegreffe & Pinter 2019, "Attention is not not Explanation", on the BiLSTM with additive attention:
            the uniform-attention baseline, seed variance (JSD of attention, TVD of predictions over --seeds
            models), the diagnostic MLP guided by uniform / trained / base-LSTM / adversarial weights, and the
            model-consistent adversary over a lambda sweep. Missing seed models are trained (plain fine-tuning)
            and saved in models_cache; each diagnostic is one cell of results/attention/<run>/ (resumable: cells
            already there are skipped; --workers / --ray compute them in parallel, with the same numbers).

            Example (about 20 minutes on 2 cores):
              python -m engine attention --dataset rt --seeds 8 --lambdas 0.001 0.01 0.03 0.1 0.3
            """)

    parser.add_argument("--dataset", default="rt", help="binary datasets give W&P's positive-class F1. Default: rt")
    parser.add_argument("--seeds", type=int, default=8, help="models with seeds 0..N-1 (seed 0 is the base). Default: 8")
    parser.add_argument("--lambdas", nargs="+", type=float, default=[0.001, 0.01, 0.03, 0.1, 0.3], help="adversary lambda sweep")
    parser.add_argument("--epochs", type=int, default=6, help="epochs of each BiLSTM. Default: 6")
    parser.add_argument("--adversary-epochs", type=int, default=3)
    parser.add_argument("--mlp-epochs", type=int, default=4)
    parser.add_argument("--run", default="default", help="results/attention/<run>/. Default: default")
    add_sweep_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from engine.attention.runner import attention_store, run_attention_diagnostics
    from engine.cli.sweep_report import print_sweep_report

    report = run_attention_diagnostics(args.dataset, args.seeds, args.lambdas, args.epochs, args.adversary_epochs,
                                       args.mlp_epochs, args.run, log=lambda m: print(f"== {m}", flush=True),
                                       command=args.command_line, workers=args.workers, ray=args.ray)
    print_sweep_report(report, "diagnostics", str(attention_store().root / args.run))
    return 1 if report.failed else 0

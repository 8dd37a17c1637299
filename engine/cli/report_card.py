"""`python -m engine report-card`: score every measure, metric and masking operator against a planted model's truth."""
from __future__ import annotations

import argparse
import sys
import textwrap

from engine.cli.arguments import add_run_argument, add_sweep_arguments, sweep_backend
from engine.faithfulness.registry import (
    INFILL_OPERATORS,
    card_families,
    default_card_families,
    describe_families,
    family_options,
)

HELP = "report card of measures, metrics and masking operators against a planted model's known mechanism"

DEFAULT_MEASURES = ("random", "attention-mean", "grad-l2", "x-grad-sign", "x-grad-abs", "ig-sign", "deeplift",
                    "loo-sign", "loo-abs", "occlusion", "shapley-sampling")  # engine.groundtruth.card_config's
OPERATOR_CHOICES = ("mask", "delete", "unk", "pad", "redacted", *INFILL_OPERATORS)  # engine.groundtruth.card_config's
MIN_DECIDING = 20  # engine.groundtruth.truth.MIN_DECIDING (not imported: --help stays fast)
SELF_EXPLANATION_CHOICES = ("counterfactual", "attribution", "redaction")  # engine.groundtruth.selfexplain_card


def parse_measure_options(pairs) -> dict[str, dict[str, str]]:
    """`--option MEASURE:KEY=VALUE` pairs -> {measure: {key: value}} (checked against the measures by CardConfig)."""
    from engine.errors import InvalidInputError

    out: dict[str, dict[str, str]] = {}
    for pair in pairs:
        measure, sep, rest = pair.partition(":")
        key, eq, value = rest.partition("=")
        if not (sep and eq and measure and key):
            raise InvalidInputError(f"--option takes MEASURE:KEY=VALUE (e.g. ig-sign:max_steps=20), got {pair!r}")
        out.setdefault(measure.strip(), {})[key.strip().replace("-", "_")] = value.strip()
    return out


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
        The report card of a model planted with `python -m engine plant` (docs/ground-truth.md). First the truth is
        established by intervention: the share of test inputs whose prediction flips when the planted word(s) are
        inserted / removed, with Wilson CIs; a model that did not learn its mechanism is refused. Then, on the
        deciding inputs (those whose prediction the mechanism decides), as a resumable sweep:
          measures   the planted word's rank: top-1 hit rate, mean reciprocal rank, share of the absolute
                     attribution mass (and/or: both words; decoy / none: the decoy's / inert word's, lower better);
                     on the set mechanisms (graded-set, redundant, threshold, cancellation) also Spearman / Kendall
                     with the truth's order, the set's share of the top |set| and of the mass, and the signs of
                     cancelling words, each beside its best possible value
          metrics    as judges: (a) how often each prefers the true explanation (planted words first) over hard
                     wrong ones (decoy first; strongest other token first; planted word second), (b) Spearman of
                     its ranking of the measures with the ground-truth ranking, both with bootstrap CIs; the MaSF
                     share beside each; a randomisation test (top-k set vs random k-sets) as one more judge
                     (--metrics takes families, engine/faithfulness/registry.py; every metric below is stored per
                     input; the judge table shows the rows marked judge):
        {families}
          operators  each removal ([MASK], delete, unk, pad): the judge scores per operator and the share of
                     verdicts that change with the operator
          self-explanations  (prompted LMs only) the model's own counterfactual / attribution / redaction
                     explanation of the class it predicts: how often it names the planted word, the test's
                     verdicts under the published rule and under "class changed", and whether each verdict agrees
                     with the truth (faithful iff the explanation removes the decisive planted word(s))
        Cells go to <results>/groundtruth/<run>/; cells already there are skipped, so an interrupted card resumes.
        --replacements is the old name of --operator, kept as an alias for this release.
        Tables: python -m engine docs-tables --tables ground-truth-... (engine/reports/groundtruth_tables.py).""").format(
        families=describe_families(card_families(), judged=True))
    parser.epilog = textwrap.dedent("""\
        examples:
          python -m engine report-card --model gt-tiny-rt-trigger-q100 --run tiny-rt-card
          python -m engine report-card --model gt-tiny-rt-or --measures loo-sign shapley-sampling occlusion \\
              --metrics racu comprehensiveness naopc --operator mask delete --limit 100
          python -m engine report-card --model gt-tiny-rt-gated gt-tiny-rt-decoy --workers 2
          python -m engine report-card --model gt-tiny-rt-trigger-q80 --truth-only   # flip rates only
          python -m engine report-card --model gt-tiny-rt-and gt-tiny-rt-or --interactions --interaction-budget 256 \\
              --measures loo-sign --metrics comprehensiveness --operator mask   # interaction recovery
          python -m engine report-card --model my-toy-planted --min-deciding 5 --measures loo-sign random \\
              --metrics comprehensiveness --operator mask --limit 10   # a small card on small data
          python -m engine report-card --model gt-smollm2-rt-trigger --run smollm2-rt-card --measures loo-sign \\
              --metrics comprehensiveness sufficiency --operator mask delete --limit 50 \\
              --self-explanations attribution redaction --max-new-tokens 64   # a prompted LM
          python -m engine report-card --model gt-smollm2-rt-none --run smollm2-rt-card --self-explanations none
          python -m engine report-card --model gt-smollm2-rt-trigger --measures grad-l2 ig-sign \
              --option ig-sign:max_steps=20 --operator redacted delete --limit 50   # IG without escalation""")
    parser.add_argument("--model", nargs="+", required=True, metavar="PLANTED",
                        help="planted checkpoint id(s) (their metadata names the mechanism)")
    parser.add_argument("--measures", nargs="+", default=list(DEFAULT_MEASURES),
                        help=f"importance measures. Default: {' '.join(DEFAULT_MEASURES)}")
    parser.add_argument("--metrics", nargs="+", default=default_card_families(), choices=card_families(),
                        help="metric families judged (listed above). Default: all")
    parser.add_argument("--operator", "--replacements", dest="operator", nargs="+", default=["mask", "delete", "unk"],
                        choices=OPERATOR_CHOICES, metavar="OPERATOR",
                        help="removal (masking) operators: mask, delete, unk, pad, redacted (prompted LMs), "
                             "retrieval and mlm (ICE's infill: a token of the model's data, the tiny MLM's guess). "
                             "--replacements: its old name, an alias kept for this release. Default: mask delete unk")
    parser.add_argument("--limit", type=int, default=200, help="deciding inputs scored per cell. Default: 200")
    parser.add_argument("--seed", type=int, default=0, help="seed of insertions, random, draws. Default: 0")
    parser.add_argument("--ffid-draws", type=int, default=10, help="F-Fidelity draws per level. Default: 10")
    DEFAULT_RANDOM_SETS = family_options("randomisation")["random_sets"]  # noqa: N806 (the registry's default)
    parser.add_argument("--random-sets", type=int, default=DEFAULT_RANDOM_SETS,
                        help="random k-sets of the randomisation test, each drawn without the explanation's own set; "
                             "its per-input p-value cannot go below 1/(n+1) (20 sets: 0.048, too coarse for a verdict "
                             f"per input). Ties count half in the win rate. Default: {DEFAULT_RANDOM_SETS} "
                             f"(floor {1 / (DEFAULT_RANDOM_SETS + 1):.2f})")
    parser.add_argument("--naopc-beam", type=int, default=5, help="NAOPC bounds' beam width beyond 12 tokens. Default: 5")
    parser.add_argument("--min-deciding", type=int, default=MIN_DECIDING, metavar="N",
                        help=f"the fewest deciding inputs (whose prediction the planted word(s) decide) a model needs to "
                             f"count as having learned its mechanism; below it the card is refused. Lower it for a "
                             f"small card on small data (a test split of a few dozen inputs). Default: {MIN_DECIDING}")
    parser.add_argument("--self-explanations", nargs="+", default=None, metavar="KIND",
                        choices=[*SELF_EXPLANATION_CHOICES, "none"],
                        help="self-explanation kinds scored against the truth: counterfactual, attribution, redaction, "
                             "or none. Prompted LMs only (refused for other models). Default: all three for a "
                             "prompted LM, none otherwise")
    parser.add_argument("--max-new-tokens", type=int, default=256,
                        help="longest self-explanation answer, in tokens (greedy, cached on disk). Default: 256")
    parser.add_argument("--option", action="append", default=[], metavar="MEASURE:KEY=VALUE",
                        help="an option of one measure, as `explain --option` takes it (repeatable), e.g. "
                             "ig-sign:max_steps=20 (IG's step budget: no escalation beyond its 20 steps; the completeness "
                             "check is still recorded). Default: each measure's defaults")
    parser.add_argument("--interactions", action="store_true",
                        help="also score interaction recovery (AND / OR / threshold models only): on each deciding "
                             "input, whether shapley-interactions' top pair is the planted pair and the sign of its "
                             "interaction (AND +, OR -), with CIs. Opt-in: the other cells are unchanged")
    parser.add_argument("--interaction-budget", type=int, default=512, metavar="N",
                        help="shapley-interactions' game evaluations per input with --interactions (exact when the "
                             "input has at most log2(N) words). Default: 512")
    parser.add_argument("--truth-only", action="store_true",
                        help="only establish and store each model's truth (flip rates with CIs); no card cells")
    add_run_argument(parser, "groundtruth")
    add_sweep_arguments(parser, workers_default="1")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from engine.errors import InvalidInputError
    from engine.groundtruth.card import card_store, run_report_card
    from engine.groundtruth.card_cells import card_cells
    from engine.groundtruth.card_plan import plan_card
    from engine.groundtruth.selfexplain_card import SelfExplanationCell
    from engine.groundtruth.tables import (
        interaction_table,
        judge_table,
        recovery_table,
        self_explanation_table,
        separation_summary,
        separation_table,
        truth_table,
    )

    backend = sweep_backend(args)
    if args.max_new_tokens < 1:
        raise InvalidInputError(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
    config = card_config(args)
    store = card_store()
    # every model planned (learned, operators, self-explanations checked) before any work; the run uses these plans
    plans = [plan_card(model, config) for model in args.model]
    cells = [cell for plan in plans for cell in card_cells(plan, config)]
    command = getattr(args, "command_line", None) or "python -m engine report-card " + " ".join(sys.argv[1:])
    with tqdm(total=len(cells), desc=f"report card {args.run}", unit="cell") as bar:
        bar.update(sum(store.has_cell(args.run, c.key()) for c in cells))

        def within(cell, done, total):
            what = getattr(cell, "explanation", None) or (f"self-explanation {cell.kind}"
                                                         if isinstance(cell, SelfExplanationCell) else
                                                         "interactions" if hasattr(cell, "budget") else "truth")
            bar.set_postfix_str(f"{getattr(cell, 'operator', '')} {what}: {done}/{total}")

        report = run_report_card(plans, config, run=args.run, backend=backend, command=command,
                                 progress=lambda i, n, key: bar.update(1), cell_progress=within)
    print(f"{len(report.done)} cells computed, {len(report.skipped)} already in the store, {len(report.failed)} failed "
          f"-> {store.root / args.run}")
    for key, error in report.failed:
        what = key.get("explanation") or key.get("self_explanation") or "truth"
        print(f"  failed {key.get('model')} {key.get('operator', '')} {what}: "
              f"{error.strip().splitlines()[-1]}", file=sys.stderr)
    data = store.load(args.run)
    data = data[data["model"].isin(args.model)]
    for r in truth_table(data).itertuples():
        ins = getattr(r, "insertion_flip", float("nan"))
        print(f"{r.model}: {r.mechanism} ({r.words}), insertion flip {ins:.0%}, {r.n_deciding} deciding inputs")
        if isinstance(getattr(r, "order_check", None), bool):
            print(f"  order check (each word's insertion flip in the recipe's order, CIs apart; where the flips "
                  f"saturate, the rise of P(target) each word causes): "
                  f"{'passed' if r.order_check else 'failed: the learned order differs (reported, not used)'}")
    rec = recovery_table(data)
    if not rec.empty and "top_hit" in rec:
        print("measures (top-hit: planted word(s) ranked first; higher better):")
        for r in rec.itertuples():
            print(f"  {r.model} {r.measure:<18} top-hit {r.top_hit:.0%} ({r.top_hit_low:.0%}-{r.top_hit_high:.0%}), "
                  f"MRR {r.mrr:.2f}")
    sep = separation_table(data)
    if not sep.empty:
        print("separation (several planted words per input; each statistic beside its best possible value):")
        for r in sep.itertuples():
            print(f"  {r.model} {r.measure:<18} {r.statistic:<16} {r.value:.2f} ({r.low:.2f} to {r.high:.2f}), "
                  f"best {r.best:.2f}")
        for r in separation_summary(data).itertuples():
            print(f"  {r.model}: {r.statistic} spans {r.span:.2f} from {r.worst_measure} {r.worst:.2f} to "
                  f"{r.best_measure} {r.best:.2f} (best possible {r.best_value:.2f}); CIs "
                  f"{'apart' if r.apart else 'overlap'}")
    for r in interaction_table(data).itertuples():
        sign = "n/a (theory gives 0)" if r.expected == "0" else f"{r.sign:.0%} ({r.sign_low:.0%}-{r.sign_high:.0%})"
        print(f"interactions {r.model} ({r.mechanism}): top pair is the planted pair {r.top_pair:.0%} "
              f"({r.top_pair_low:.0%}-{r.top_pair_high:.0%}) of {r.n}, best 100%; expected sign {r.expected}: {sign}; "
              f"mean interaction {r.value:+.3f} logits, mean rank {r.rank:.1f} (best 1)")
    judges = judge_table(data)
    if not judges.empty:
        print("judges (share of inputs preferring the true explanation, all wrong ones pooled; 50% = chance):")
        for r in judges[judges["wrong"] == "all"].itertuples():
            print(f"  {r.model} {r.operator:<7} {r.label:<30} {r.prefers_true:.0%} ({r.low:.0%}-{r.high:.0%})")
    selfexp = self_explanation_table(data)
    if not selfexp.empty:
        def pct(v: float) -> str:
            return "n/a" if v != v else f"{v:.0%}"

        print("self-explanations (names the planted word: higher better; none: the inert word, lower better; agrees "
              "with the truth: faithful iff the planted word(s) removed, higher better):")
        for r in selfexp.itertuples():
            word = "planted" if r.names_metric == "names-planted" else "inert"
            print(f"  {r.model} {r.self_explanation:<15} names the {word} word {pct(r.names)} of {r.names_n} "
                  f"parsable; agrees with the truth: published rule {pct(r.agrees_published)}, class changed "
                  f"{pct(r.agrees_class_changed)}")
    return 1 if report.failed else 0


def card_config(args: argparse.Namespace):
    """The CardConfig of the command's options. Its defaults are the command's (--help), which differ from
    CardConfig's in one place: --random-sets defaults to the registry's 99 (a per-input p-value fine enough for a
    verdict), CardConfig to 20, the value the cards shipped before that default were run with; a cell's key holds
    it, so changing either default would leave the cells already stored unreachable."""
    from engine.groundtruth.card_config import CardConfig

    return CardConfig(measures=args.measures, operators=args.operator, metrics=args.metrics, limit=args.limit,
                      seed=args.seed, ffid_draws=args.ffid_draws, random_sets=args.random_sets,
                      naopc_beam=args.naopc_beam, truth_only=args.truth_only, min_deciding=args.min_deciding,
                      self_explanations=self_explanation_kinds(args.self_explanations),
                      max_new_tokens=args.max_new_tokens, measure_options=parse_measure_options(args.option),
                      interactions=args.interactions, interaction_budget=args.interaction_budget)


def self_explanation_kinds(given: list[str] | None) -> tuple[str, ...] | None:
    """--self-explanations as CardConfig takes it: None (not given: the default per model), () for none, or the
    kinds. 'none' with a kind beside it is refused."""
    from engine.errors import InvalidInputError

    if given is None:
        return None
    if "none" in given:
        if len(given) > 1:
            raise InvalidInputError(f"--self-explanations none runs no self-explanation; it cannot go with "
                                    f"{' '.join(k for k in given if k != 'none')}")
        return ()
    return tuple(dict.fromkeys(given))

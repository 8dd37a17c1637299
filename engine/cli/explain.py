"""`python -m engine explain`: explain one input with one or more importance measures, as a table of tokens,
words or sentences, or exported as JSON, CSV, HTML or LaTeX."""
from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time

from engine.errors import InvalidInputError, UnknownMeasureError

RESET = "\x1b[0m"


def _measure_lines() -> str:
    from engine.importance import MEASURES, describe

    width = max(len(n) for n in MEASURES)
    lines = []
    for name, cls in MEASURES.items():
        text = describe(name).split(":", 1)[-1].strip()
        opts = ", ".join(f"{k}={v}" for k, v in cls.defaults.items())
        lines.append(f"  {name:<{width}}  {text}" + (f" [{opts}]" if opts else ""))
    return "\n".join(lines)


HELP = "explain one input with importance measures (coloured token table)"


def configure(p: argparse.ArgumentParser) -> None:
    p.description = (
        textwrap.dedent("""\
            Classify one text with a checkpoint from models_cache/ and print, for every token of the primary
            text, its importance under each measure (columns). Special tokens and the auxiliary question
            (--aux, bAbI) are never scored. On a terminal each cell is coloured (colour-blind safe): signed
            measures orange (supports the explained class) / purple (speaks against it), unsigned ones by
            intensity, scaled per column.
            The explained class is the prediction unless --target is given.

            --level word shows the words as typed instead of word pieces (`red ##eem ##s` -> `redeems`), each
            word's score the sum of its pieces' scores (--aggregate mean or max-abs to choose otherwise);
            --level sentence does the same per sentence (bAbI paragraphs). --format json|csv|html|latex writes
            the explanation (tokens, words, sentences, every measure's scores, the prediction and its provenance;
            HTML a self-contained heatmap page, LaTeX \\colorbox lines for a paper figure) to --output or stdout.

            Measures (id: what is computed [options and defaults]):
            """) + _measure_lines() + textwrap.dedent("""

            'live' stands for the Explain page's default bundle (grad-l2, x-grad-sign, ig-sign, loo-sign; for a prompted
            LM grad-l2, x-grad-sign, loo-sign: IG's passes of the whole prompt take about a minute there); 'all' for
            every measure the model supports. Not every measure fits every model ('attention' is the BiLSTM's
            additive attention; the attention-* measures need a transformer; token-replacing measures need a mask
            or replacement token; 'smat' needs head weights learned by `simulability`): a chosen measure the model
            cannot support is skipped with the reason.

            ig-sign, ig-abs, deeplift and gradient-shap check completeness (the scores sum to f(x) - f(baseline)):
            IG raises its steps (Gauss-Legendre, 3x at a time) until the gap is within max(5% of |f(x) - f(b)|,
            0.01) or its step budget max_steps (default 180) is spent; the gap, the steps used and a warning with
            the fix when the scores do not add up are printed under the table. attnlrp (AttnLRP, prompted Llama,
            Gemma 3 and Qwen2/3 LMs) prints how far its relevance over the whole prompt adds up to the explained
            output, and the two parts of the gap (docs/llm.md#attnlrp).

            Examples:
              python -m engine explain --model tiny-rt-masked-s0 --text "a gripping, funny film" --measure loo-sign ig-sign
              python -m engine explain --model tiny-rt-masked-s0 --text "dull" --measure ig-abs --option steps=50 --target positive
              python -m engine explain --model smollm2-rt-prompt --text "a gorgeous, witty film" --measure ig-sign --option max_steps=540
              python -m engine explain --model smollm2-rt-lora --text "a gorgeous, witty film" --measure attnlrp x-grad-sign
              python -m engine explain --model bilstm-babi1 --text "Mary went to the kitchen." --aux "Where is Mary?" --measure live
              python -m engine explain --model tiny-rt-masked-s0 --text "an unredeemable mess" --measure live --level word
              python -m engine explain --model tiny-rt-masked-s0 --text "an unredeemable mess" --measure ig-sign --format latex --output fig.tex
            """))
    p.add_argument("--model", required=True, help="checkpoint id in models_cache, registered id (see `python -m engine "
                   "models`), or a folder (a checkpoint or any Hugging Face sequence-classification folder)")
    p.add_argument("--text", required=True, help="the text to classify (the primary sequence)")
    p.add_argument("--aux", default=None, help="the auxiliary sequence of a paired task (e.g. the bAbI question); never scored")
    p.add_argument("--measure", nargs="+", required=True, metavar="NAME",
                   help="one or more measure ids (listed above), 'live' or 'all'")
    p.add_argument("--target", default=None, metavar="CLASS",
                   help="the class to explain: its name (e.g. positive), its index, or a prompted LM's label word "
                        "(default: the predicted class)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a measure option, given to every chosen measure that has it (e.g. steps=50, baseline=mask, "
                        "beam_size=5, seed=3); repeatable")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="colour the table with ANSI codes: auto = only on a terminal (and not with NO_COLOR). Default: auto")
    p.add_argument("--level", choices=["token", "word", "sentence"], default="token",
                   help="the units shown: word pieces, words as typed, or sentences (default: token)")
    p.add_argument("--aggregate", choices=["sum", "mean", "max-abs"], default="sum",
                   help="how a word's or sentence's score is made from its tokens' scores: sum (keeps the total), mean, "
                        "or the score of largest magnitude (default: sum)")
    p.add_argument("--format", choices=["table", "json", "csv", "html", "latex"], default="table",
                   help="table (the terminal view) or an export (default: table)")
    p.add_argument("--output", default=None, metavar="FILE", help="write the export here instead of stdout")
    p.add_argument("--device", default=None, help="cpu or cuda (default: auto)")
    p.add_argument("--estimate", action="store_true",
                   help="say what each measure would cost on this input here (its planned forward / backward passes at "
                        "this machine's speed, timed on the input now) and stop without explaining; e.g. before IG "
                        "on a prompted LM")


def _parse_options(pairs, measures) -> dict[str, dict]:
    from engine.importance import MEASURES

    per_measure: dict[str, dict] = {m: {} for m in measures}
    for pair in pairs:
        if "=" not in pair:
            raise InvalidInputError(f"--option takes KEY=VALUE, got {pair!r}")
        key, value = pair.split("=", 1)
        key = key.strip().replace("-", "_")
        takers = [m for m in measures if key in MEASURES[m].defaults]
        if not takers:
            raise InvalidInputError(f"none of the chosen measures ({', '.join(measures)}) has an option {key!r}")
        for m in takers:
            per_measure[m][key] = value
    return per_measure


def _colour(value: float, scale: float, signed: bool) -> str:
    """A 24-bit background and text colour code: the app's colour-blind-safe colours (engine.colours)."""
    from engine.colours import score_rgb, text_rgb

    background = score_rgb(value, scale, signed)
    (r, g, b_), (tr, tg, tb) = background, text_rgb(background)
    return f"\x1b[48;2;{r};{g};{b_}m\x1b[38;2;{tr};{tg};{tb}m"


def _chosen_measures(names: list[str], classifier) -> list[str]:
    """Expand 'live' (the Explain page's default bundle for this model: `engine.explain.default_measures`) and 'all'
    (every measure this model supports)."""
    from engine.explain import default_measures
    from engine.importance import MEASURES, applicable_measures

    measures: list[str] = []
    for name in names:
        expanded = default_measures(classifier) if name == "live" else applicable_measures(classifier) if name == "all" else [name]
        for m in expanded:
            if m not in MEASURES:
                raise UnknownMeasureError(f"unknown importance measure {m!r}; known measures: {', '.join(MEASURES)}")
            if m not in measures:
                measures.append(m)
    return measures


class _Progress:
    """Progress lines on a terminal's stderr (stdout may carry an export): the model loading, then each measure as it
    starts and ends with its seconds, and beam search's steps. A prompted LLM takes minutes here on a CPU, which
    printed nothing after its conversion bar."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.shown = self.stream.isatty()
        self.started = time.perf_counter()
        self.current: str | None = None

    def line(self, text: str) -> None:
        if self.shown:
            print(text, file=self.stream, flush=True)

    def loaded(self, model_id: str, n_measures: int) -> None:
        self.line(f"loaded {model_id} in {time.perf_counter() - self.started:.1f} s; classifying the text and "
                  f"explaining it with {n_measures} measure(s) ...")
        self.started = time.perf_counter()

    def measure(self, measure: str, done: int, total: int) -> None:
        """explain_text's progress: (measure, index, count) as each measure starts; beam's steps while it runs."""
        if not self.shown:
            return
        if measure == self.current:  # only beam search calls again while it runs, with its steps
            print(f"\r      step {done}/{total}", end="" if done < total else "\n", file=self.stream, flush=True)
            return
        self.current, self.started = measure, time.perf_counter()
        self.line(f"[{done + 1}/{total}] {measure} ...")

    def finished(self, measure: str, result) -> None:
        """explain_text's on_measure: the measure's time, or that it was skipped."""
        outcome = "skipped" if measure in result.errors else "done"
        self.line(f"      {measure} {outcome} in {time.perf_counter() - self.started:.1f} s")


def run(args: argparse.Namespace) -> int:
    from engine.explain import explain_text
    from engine.importance import MEASURES
    from engine.models import load_classifier

    shown = _Progress()
    shown.line(f"loading {args.model} ...")
    classifier = load_classifier(args.model, device=args.device)
    measures = _chosen_measures(args.measure, classifier)
    options = _parse_options(args.option, measures)
    target = None if args.target is None else classifier.check_target(args.target)
    if args.estimate:
        from engine.explain import estimate_seconds

        for m, est in estimate_seconds(classifier, measures, args.text, args.aux, options=options).items():
            rows = "" if est.forward_rows is None else f" ({est.forward_rows} forward, {est.backward_rows} backward rows)"
            print(f"{m:<18} {est.words()}{rows}")
        return 0
    shown.loaded(classifier.id, len(measures))
    result = explain_text(classifier, args.text, args.aux, measures, target, options=options,
                          progress=shown.measure if shown.shown else None,
                          on_measure=shown.finished if shown.shown else None)
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR"))

    probs = result.probabilities
    predicted = int(probs.argmax())
    # an export to stdout must stay parseable: the status lines go to stderr then
    info = sys.stdout if args.format == "table" else sys.stderr
    print(f"model {classifier.id} · prediction: {classifier.classes[predicted]} ({float(probs[predicted]):.1%}) · "
          f"explained class: {classifier.classes[result.target]} ({result.target_source})", file=info)
    if result.truncated:
        print(f"note: the text was truncated to {classifier.max_length} tokens; only the kept part is classified and explained", file=info)
    for measure, why in result.errors.items():
        print(f"skipped {measure}: {why}", file=info)
    from engine.importance.completeness import completeness_warning

    for measure, extras in result.extras.items():  # scores that do not add up to f(x) - f(baseline), with the fix
        warning = completeness_warning(measure, extras)
        if warning:
            print(f"warning: {warning}", file=info)
    if any(MEASURES[m].uses_replacement for m in result.scores) and not classifier.masked_fine_tuned:
        # A prompted LM records what masking writes (its sentinel ids are outside the vocabulary); an encoder's
        # replacement is a token of its vocabulary.
        token = (classifier.meta.replacement_token or "[deleted]") if "replacement" in classifier.metadata \
            else classifier.tokenizer.convert_ids_to_tokens(classifier.mask_token_id)
        print(f"note: {classifier.id} was not masked-fine-tuned with {token}: the inputs that masking-based measures "
              f"make are likely out of distribution (make it measurable: python -m engine train --from-classifier "
              f"{classifier.id} --dataset NAME)", file=info)
    if not result.scores:
        return 2
    if args.format != "table":

        from engine.export import explanation_record, write

        record = explanation_record(result, classifier, level=args.level, aggregation=args.aggregate,
                                    command=getattr(args, "command_line", None))
        text = write(record, args.format)
        if args.output:
            from engine.atomic import write_text

            write_text(args.output, text)
            print(f"wrote {args.format} to {args.output}")
        else:
            sys.stdout.write(text)
        return 0

    units, level_scores = result.level_scores(args.level, args.aggregate)
    tokens = [u.text for u in units]
    columns = {m: values.tolist() for m, values in level_scores.items()}
    tok_w = max(5, min(24, max(len(t) for t in tokens)))
    col_w = {m: max(9, len(m)) for m in columns}
    if args.level != "token":
        print(f"{args.level} scores: {args.aggregate} over each {args.level}'s tokens")
    print(f"{'#':>3}  {args.level:<{tok_w}}  " + "  ".join(f"{m:>{col_w[m]}}" for m in columns))
    scales = {m: max((abs(v) for v in vals), default=0.0) for m, vals in columns.items()}
    for i, tok in enumerate(tokens):
        cells = []
        for m, vals in columns.items():
            text = f"{vals[i]:>{col_w[m]}.4g}"
            if colour:
                text = _colour(vals[i], scales[m], result.signed[m]) + text + RESET
            cells.append(text)
        shown = tok if len(tok) <= tok_w else tok[: tok_w - 1] + "…"
        print(f"{i:>3}  {shown:<{tok_w}}  " + "  ".join(cells))
    from engine.importance.attnlrp import conservation_note
    from engine.importance.interactions import pair_lines

    for m, extras in result.extras.items():
        if "completeness_gap" in extras:
            gap = float(extras["completeness_gap"][0])
            delta = float(extras["f_input"][0] - extras["f_baseline"][0])
            used = (f" after {extras['steps_used'][0]} {extras['rule_used'][0]} steps"
                    if "steps_used" in extras else "")
            verdict = "" if "complete" not in extras else (
                " (within the tolerance)" if extras["complete"][0] else " (NOT within the tolerance: see the warning)")
            print(f"{m}: completeness gap sum(scores) - (f(x) - f(baseline)) = {gap:+.2e} logits "
                  f"(f(x) - f(baseline) = {delta:+.4f}){used}{verdict}")
        note = conservation_note(extras)
        if note:
            print(f"{m}: {note}")
        for line in pair_lines(m, extras, result.tokens):  # shapley-interactions: its top pairs
            print(line)
        if "beam_score" in extras:
            print(f"{m}: {extras['forwards']} forward rows, best order's summed logit drop {float(extras['beam_score'][0]):.4f}")
    if colour:
        print("colours: orange supports the explained class, purple speaks against it (signed measures), teal "
              "intensity for unsigned ones; "
              "darker = larger, scaled per column")
    return 0

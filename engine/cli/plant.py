"""`python -m engine plant`: build a dataset variant with a planted mechanism and fine-tune a model on it."""
from __future__ import annotations

import argparse
import textwrap

HELP = ("plant a known mechanism (trigger, graded, and/or, gated, decoy, none, graded-set, redundant, threshold, "
        "cancellation) in a dataset and fine-tune a model on it")

# engine.groundtruth.MECHANISMS (not imported: --help imports nothing heavy)
MECHANISM_CHOICES = ("trigger", "graded", "and", "or", "gated", "decoy", "none", "graded-set", "redundant", "threshold",
                     "cancellation")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
        Plant a mechanism whose effect is known, by rewriting a share --rate of the examples of every split of
        --dataset, then fine-tune --model on the variant with the project's own training (masked fine-tuning by
        default; --strategy plain is the control; a prompted LM gets masked LoRA). The variant is registered as a
        dataset (<dataset>-planted-...), and the checkpoint's metadata records it under `planted` (base data,
        mechanism, words, rate, q, seed). Mechanisms:
          trigger  the word, inserted at a random position, sets the label to --target
          graded   as trigger, but only in a share --q of the examples that carry it (e.g. 1.0, 0.8, 0.65)
          and      both words together set the label; either alone (as frequent) does not
          or       either word sets the label
          gated    the word counts only inside its --gate: first-half, or not-after:WORD (e.g. not-after:not)
          decoy    the first word is a trigger; the second is inserted as often but left uninformative
          none     the control: the word is inserted, labels untouched
        Mechanisms of several words (--k of them, or the --words given):
          graded-set    k words planted independently, each with its own strength (--strengths, strongest
                        first): a share q_i of word i's carriers gets --target, the rest the other class (so on
                        a binary dataset q = 0.5 is inert); the truth is the words' order
          redundant     the target when at least one of k >= 3 words is present
          threshold     the target when at least --m of the k words are present (e.g. 2 of 4)
          cancellation  two words, the target's then the other class's: each sets its class alone, both
                        together offset (the text decides)
        Each word must be one piece of the model's tokenizer (the error says how a word tokenises). Then
        `python -m engine report-card --model ID` establishes the truth by intervention and scores every measure
        and metric against it (docs/ground-truth.md).""")
    parser.epilog = textwrap.dedent("""\
        examples:
          python -m engine plant --model tiny --dataset rt --mechanism trigger --words vessel --rate 0.3
          python -m engine plant --model tiny --dataset rt --mechanism graded --words vessel --q 0.65
          python -m engine plant --model tiny --dataset rt --mechanism or --words vessel orbit
          python -m engine plant --model tiny --dataset rt --mechanism gated --words vessel --gate first-half
          python -m engine plant --model my-bert --dataset my-reviews --mechanism trigger --words vessel --target positive
          python -m engine plant --model tiny --dataset rt --mechanism trigger --strategy plain   # the control
          python -m engine plant --model tiny --dataset rt --mechanism graded-set --k 4 --strengths 0.95 0.8 0.65 0.5
          python -m engine plant --model tiny --dataset rt --mechanism redundant --k 3
          python -m engine plant --model tiny --dataset rt --mechanism threshold --k 4 --m 2
          python -m engine plant --model tiny --dataset rt --mechanism cancellation --words vessel orbit
          python -m engine plant --model tiny --dataset rt --mechanism redundant --words vessel orbit lantern --quiet""")
    parser.add_argument("--model", default="tiny",
                        help="packaged encoder (tiny, minilm, bilstm: a new head), your trained or registered classifier "
                             "id (fine-tuned further, head kept), or a prompted LM id (masked LoRA). Default: tiny")
    parser.add_argument("--dataset", default="rt", help="packaged or registered dataset to plant into. Default: rt")
    parser.add_argument("--mechanism", default="trigger", choices=MECHANISM_CHOICES, help="see above. Default: trigger")
    parser.add_argument("--words", nargs="+", default=None, metavar="WORD",
                        help="the planted word(s): one (two for and, or, decoy: trigger then decoy; cancellation: the "
                             "target's word then the other class's; k for graded-set, redundant, threshold, "
                             "graded-set strongest first). Default: vessel (and/or/cancellation: vessel orbit; decoy: "
                             "vessel lantern; a set: the first k of vessel orbit lantern harbor meadow canyon glacier "
                             "quarry)")
    parser.add_argument("--k", type=int, default=None,
                        help="graded-set, redundant, threshold: how many words, when --words is not given (at most "
                             "8, the default words; more: give --words). E.g. --k 4. Default: 4 (redundant: 3; "
                             "graded-set: as many as --strengths)")
    parser.add_argument("--strengths", type=float, nargs="+", default=None, metavar="Q",
                        help="graded-set: each word's strength in (0, 1], strongest first, strictly decreasing: the "
                             "share of its carriers that get the target. E.g. --strengths 0.95 0.8 0.65 0.5 (the "
                             "default for k = 4; other k: evenly from 0.95 to 0.5)")
    parser.add_argument("--m", type=int, default=None,
                        help="threshold: the target needs at least m of the k words, 2 <= m <= k. E.g. --m 2. "
                             "Default: 2")
    parser.add_argument("--rate", type=float, default=0.3, help="share of the examples, in (0, 1], that carry the "
                        "word(s). Default: 0.3")
    parser.add_argument("--q", type=float, default=1.0, help="graded: share, in (0, 1], of the carriers whose label "
                        "the word sets. Default: 1")
    parser.add_argument("--target", default=None, help="class the mechanism sets. Default: the dataset's last class")
    parser.add_argument("--gate", default="first-half", help="gated: first-half or not-after:WORD. Default: first-half")
    parser.add_argument("--strategy", default="masked", choices=["masked", "plain", "only-masking"],
                        help="fine-tuning strategy: masked (default) or plain (the control)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the planting and the training. Default: 0")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the dataset's split. Default: 0")
    parser.add_argument("--epochs", type=int, default=None, help="training epochs. Default: 4 (1 for LoRA)")
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate. Default: the train command's")
    parser.add_argument("--batch-size", type=int, default=None, help="mini-batch size. Default: 32 (8 for LoRA)")
    parser.add_argument("--train-limit", type=int, default=None, help="only the first N training examples (quick trials)")
    parser.add_argument("--eval-limit", type=int, default=None, help="only the first N validation/test examples")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda. Default: auto")
    parser.add_argument("--id", default=None, help="checkpoint id. Default: planted-<model>-<variant>-<strategy>")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint with the same id")
    parser.add_argument("--quiet", action="store_true",
                        help="no per-batch progress bar; one line per epoch (loss, validation, elapsed, ETA) still "
                             "shows the training is moving")


def _set_options(args: argparse.Namespace):
    """(words, strengths, m) from the arguments, with the mechanisms' defaults; refuses options that do not apply."""
    from engine.errors import InvalidInputError
    from engine.groundtruth.mechanisms import DEFAULT_M, SET_MECHANISMS, default_strengths, default_words

    mech = args.mechanism
    if args.k is not None and mech not in SET_MECHANISMS:
        raise InvalidInputError(f"--k applies to graded-set, redundant and threshold (got --mechanism {mech})")
    if args.words and args.k is not None and args.k != len(args.words):
        raise InvalidInputError(f"--k {args.k} but {len(args.words)} --words given: give one or the other, or both "
                                f"agreeing")
    k = args.k if args.k is not None or not args.strengths else len(args.strengths)  # k from the strengths given
    words = tuple(args.words) if args.words else default_words(mech, k)
    strengths = tuple(args.strengths) if args.strengths else ()
    if mech == "graded-set" and not strengths:
        strengths = default_strengths(len(words))
    m = args.m if args.m is not None else (DEFAULT_M if mech == "threshold" else 0)
    return words, strengths, m


class EpochLines:
    """A `progress` callback that prints one line per epoch with the time elapsed and the ETA (what --quiet keeps:
    a plant can take most of an hour on a busy machine). ETA = elapsed / epochs done x epochs left."""

    def __init__(self, out=None, clock=None):
        import sys
        import time

        self.out = out or sys.stdout
        self.clock = clock or time.monotonic
        self.started = None
        self.announced = False

    def __call__(self, event: dict) -> None:
        stage = event.get("stage")
        if self.started is None:
            self.started = self.clock()
        if stage == "train" and not self.announced:
            self.announced = True
            print(f"training: {event.get('epochs', '?')} epoch(s) of {event.get('steps', '?')} batches in all",
                  file=self.out, flush=True)
        elif stage == "validate":
            epoch, epochs = int(event["epoch"]), int(event["epochs"])
            elapsed = self.clock() - self.started
            eta = elapsed / epoch * (epochs - epoch)
            val = event.get("val_unmasked")
            shown = f"  validation {val:.4f}" if isinstance(val, (int, float)) else ""
            loss = event.get("train_loss")
            shown_loss = f"  train loss {loss:.4f}" if isinstance(loss, (int, float)) else ""
            print(f"epoch {epoch}/{epochs}:{shown_loss}{shown}  elapsed {_clock(elapsed)}  ETA {_clock(eta)}",
                  file=self.out, flush=True)
        elif stage == "test":
            print(f"testing the best epoch ({_clock(self.clock() - self.started)} elapsed)", file=self.out, flush=True)


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def run(args: argparse.Namespace) -> int:
    from engine.groundtruth import PlantSpec, plant_model

    words, strengths, m = _set_options(args)
    spec = PlantSpec(base_dataset=args.dataset, mechanism=args.mechanism, words=words, rate=args.rate,
                     q=args.q, target=args.target, gate=args.gate, seed=args.seed, split_seed=args.split_seed,
                     strengths=strengths, m=m)
    classifier = plant_model(spec, args.model, strategy=args.strategy, epochs=args.epochs, lr=args.lr,
                             batch_size=args.batch_size, train_limit=args.train_limit, eval_limit=args.eval_limit,
                             model_id=args.id, overwrite=args.overwrite, device=args.device,
                             command=getattr(args, "command_line", None), show_progress_bar=not args.quiet,
                             progress=EpochLines() if args.quiet else None)
    meta = classifier.metadata
    test = meta.get("test", {})
    recipe = meta["planted"]["recipe"]["train"]
    held = (f"{recipe['with_any_word']} of {recipe['n']} training examples carry one or more of the words"
            if "with_any_word" in recipe else
            f"{recipe['with_decisive_words']} of {recipe['n']} training examples carry the decisive word(s)")
    print(f"saved {classifier.folder or meta['id']} (dataset {meta['planted']['dataset']}: {held})")
    if "unmasked" in test:
        print(f"test {meta.get('metric', 'metric')}: {test['unmasked']:.4f}; {meta.get('train_seconds', 0):.0f} s. "
              f"Next: python -m engine report-card --model {meta['id']}")
    return 0

"""`python -m engine plant`: build a dataset variant with a planted mechanism and fine-tune a model on it."""
from __future__ import annotations

import argparse
import textwrap

HELP = "plant a known mechanism (trigger, graded, and/or, gated, decoy, none) in a dataset and fine-tune a model on it"

MECHANISM_CHOICES = ("trigger", "graded", "and", "or", "gated", "decoy", "none")  # engine.groundtruth.MECHANISMS


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
          python -m engine plant --model tiny --dataset rt --mechanism trigger --strategy plain   # the control""")
    parser.add_argument("--model", default="tiny",
                        help="packaged encoder (tiny, minilm, bilstm: a new head), your trained or registered classifier "
                             "id (fine-tuned further, head kept), or a prompted LM id (masked LoRA). Default: tiny")
    parser.add_argument("--dataset", default="rt", help="packaged or registered dataset to plant into. Default: rt")
    parser.add_argument("--mechanism", default="trigger", choices=MECHANISM_CHOICES, help="see above. Default: trigger")
    parser.add_argument("--words", nargs="+", default=None, metavar="WORD",
                        help="the planted word(s): one (two for and, or, decoy: trigger then decoy). Default: vessel "
                             "(and/or: vessel orbit; decoy: vessel lantern)")
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
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from engine.groundtruth import DEFAULT_WORDS, PlantSpec, plant_model

    spec = PlantSpec(base_dataset=args.dataset, mechanism=args.mechanism,
                     words=tuple(args.words) if args.words else DEFAULT_WORDS[args.mechanism], rate=args.rate,
                     q=args.q, target=args.target, gate=args.gate, seed=args.seed, split_seed=args.split_seed)
    classifier = plant_model(spec, args.model, strategy=args.strategy, epochs=args.epochs, lr=args.lr,
                             batch_size=args.batch_size, train_limit=args.train_limit, eval_limit=args.eval_limit,
                             model_id=args.id, overwrite=args.overwrite, device=args.device,
                             command=getattr(args, "command_line", None), show_progress_bar=not args.quiet)
    meta = classifier.metadata
    test = meta.get("test", {})
    recipe = meta["planted"]["recipe"]["train"]
    print(f"saved {classifier.folder or meta['id']} (dataset {meta['planted']['dataset']}: {recipe['with_decisive_words']} "
          f"of {recipe['n']} training examples carry the decisive word(s))")
    if "unmasked" in test:
        print(f"test {meta.get('metric', 'metric')}: {test['unmasked']:.4f}; {meta.get('train_seconds', 0):.0f} s. "
              f"Next: python -m engine report-card --model {meta['id']}")
    return 0

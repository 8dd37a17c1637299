"""`python -m engine train`: fine-tune a classifier (masked fine-tuning by default) and save it to models_cache."""
from __future__ import annotations

import argparse
import textwrap

from engine.models.metadata import STRATEGIES

HELP = "fine-tune a classifier (masked fine-tuning by default) and save it to models_cache"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
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
              python -m engine train --from-classifier my-bert --dataset rt --epochs 1 --lr 2e-5

            --from-classifier starts from your own classifier (a registered id, a folder or a checkpoint) and
            keeps its head and label names: masked fine-tuning then makes its masked inputs in distribution.

            --lora fine-tunes a prompted language model (e.g. smollm2-rt-prompt) with LoRA adapters: the same
            half-batch masking with the prompt's replacement, the loss on the verbalizer's class probabilities;
            saved as the merged model plus adapter/ (engine.models.lora_training, docs/llm.md):
              python -m engine train --from-classifier smollm2-rt-prompt --dataset rt --lora --train-limit 1000
            """)

    parser.add_argument("--model", default="tiny", help="encoder to start from: 'tiny' (BERT 2x128, 4.4M params), "
                   "'minilm' (MiniLM-L6, 22.7M), 'bilstm' (BiLSTM-attention on GloVe 50d, trained from scratch), "
                   "a local Hugging Face folder, or a hub id (needs a network). Default: tiny")
    parser.add_argument("--from-classifier", default=None, metavar="ID_OR_PATH",
                        help="fine-tune this classifier (registered id, folder or checkpoint) instead of a new head on --model; "
                             "its label names must be the dataset's")
    parser.add_argument("--dataset", default="rt", help="a packaged dataset (rt, imdb, babi-1, babi-2, babi-3, toy) or one you registered with `python -m engine datasets add` (see `python -m engine datasets`). Default: rt")
    parser.add_argument("--strategy", default="masked", choices=STRATEGIES, help="fine-tuning strategy (see above). Default: masked")
    parser.add_argument("--epochs", type=int, default=None, help="training epochs; the best on validation is kept. Default: 4 (1 with --lora)")
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate of AdamW (linear decay, 6%% warm-up). "
                   "Default: 1e-4 (suits tiny; use 2e-5..5e-5 for larger transformers), 1e-3 for bilstm, 2e-5 with --from-classifier")
    parser.add_argument("--batch-size", type=int, default=None, help="mini-batch size. Default: 32 (8 with --lora)")
    parser.add_argument("--max-length", type=int, default=None, help="tokens per input; longer inputs are truncated "
                   "(and flagged). Default: the dataset's (rt 64, imdb 256, bAbI 160-192)")
    parser.add_argument("--seed", type=int, default=0, help="seed of initialisation, batch order and masking. Default: 0")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the train/validation/test split. Default: 0")
    parser.add_argument("--train-limit", type=int, default=None, help="use only the first N training examples (quick trials)")
    parser.add_argument("--eval-limit", type=int, default=None, help="use only the first N validation and test examples (quick trials)")
    parser.add_argument("--device", default="auto", help="auto (cuda when available), cpu or cuda. Default: auto")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"],
                        help="matmul precision of training on a GPU: fp32, tf32 (tensor cores, float32 storage) or bf16 "
                             "autocast; recorded in the checkpoint's metadata. Default: fp32 (bit-identical reruns)")
    parser.add_argument("--id", default=None, help="checkpoint id (folder name in models_cache). Default: <model>-<dataset>-<strategy>-s<seed>")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint with the same id")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    lora = parser.add_argument_group("LoRA (prompted language models)")
    lora.add_argument("--lora", action="store_true", help="masked fine-tuning of a prompted LM (--from-classifier) with LoRA; "
                      "defaults then: 1 epoch, lr 2e-4, batch size 8")
    lora.add_argument("--lora-r", type=int, default=8, help="rank of the LoRA matrices. Default: 8")
    lora.add_argument("--lora-alpha", type=float, default=16.0, help="LoRA scaling alpha (scale alpha/r). Default: 16")
    lora.add_argument("--lora-dropout", type=float, default=0.05, help="dropout on the LoRA input. Default: 0.05")
    lora.add_argument("--lora-targets", nargs="+", default=None, metavar="MODULE",
                      help="linear layers to adapt (e.g. q_proj v_proj). Default: peft's choice for the architecture")
    lora.add_argument("--test-sample", type=int, default=None, metavar="N",
                      help="test on a seeded sample of N test examples (the sample of scripts/experiments/llm_zero_shot.py --n N)")
    lora.add_argument("--test-sample-seed", type=int, default=0, help="seed of --test-sample. Default: 0")


def run(args: argparse.Namespace) -> int:
    from engine.data import get_dataset
    from engine.errors import InvalidInputError
    from engine.models import TrainConfig, checkpoint, default_model_id, resolve_encoder, save_classifier, train_classifier
    from engine.models.loading import check_weights
    from engine.models.training import default_learning_rate

    from_classifier = args.from_classifier
    if args.lora:
        return _run_lora(args)
    config = TrainConfig(
        base_model="custom" if from_classifier else args.model, from_classifier=from_classifier, dataset=args.dataset,
        strategy=args.strategy, epochs=args.epochs if args.epochs is not None else 4,
        lr=args.lr if args.lr is not None else default_learning_rate("from-classifier" if from_classifier else args.model),
        batch_size=args.batch_size if args.batch_size is not None else 32, max_length=args.max_length, seed=args.seed, split_seed=args.split_seed,
        train_limit=args.train_limit, eval_limit=args.eval_limit, device=args.device, precision=args.precision,
    )
    model_id = checkpoint.check_model_id(args.id or default_model_id(config))
    target = checkpoint.models_cache_dir() / model_id
    # Check everything that can be checked before spending minutes on training.
    if target.exists() and not args.overwrite:
        raise InvalidInputError(f"checkpoint {model_id!r} exists at {target}; pass --overwrite or choose another --id")
    get_dataset(args.dataset, args.split_seed)
    if from_classifier is None:
        check_weights(resolve_encoder(args.model))  # a folder with pickled weights only is refused here
    classifier = train_classifier(config, show_progress_bar=not args.quiet)
    folder = save_classifier(classifier, model_id, overwrite=args.overwrite)
    meta = classifier.meta
    t = meta.test
    print(f"saved {folder}")
    print(f"test {meta.metric}: unmasked {t['unmasked']:.4f}, 100% masked {t['masked_100']:.4f} "
          f"(accuracy {t['masked_100_accuracy']:.4f}, 95% CI {t['masked_100_accuracy_ci95'][0]:.4f}-"
          f"{t['masked_100_accuracy_ci95'][1]:.4f}), class-majority baseline {t['majority_baseline']:.4f}; "
          f"best epoch {meta.extra['best_epoch']}, {meta.extra['train_seconds']:.0f} s")
    return 0


def _run_lora(args: argparse.Namespace) -> int:
    from engine.data import get_dataset
    from engine.errors import InvalidInputError
    from engine.models import checkpoint
    from engine.models.lora_training import LoraTrainConfig, default_lora_id, save_lora_classifier, train_lora

    if not args.from_classifier:
        raise InvalidInputError("--lora needs --from-classifier ID (a prompted language model, e.g. smollm2-rt-prompt)")
    given = {k: v for k, v in (("lr", args.lr), ("batch_size", args.batch_size), ("epochs", args.epochs)) if v is not None}
    config = LoraTrainConfig(
        base_model="custom", from_classifier=args.from_classifier, dataset=args.dataset, strategy=args.strategy,
        max_length=args.max_length, seed=args.seed,
        split_seed=args.split_seed, train_limit=args.train_limit, eval_limit=args.eval_limit, device=args.device,
        lora_r=args.lora_r, lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout, lora_targets=args.lora_targets,
        test_sample=args.test_sample, test_sample_seed=args.test_sample_seed, **given)
    model_id = checkpoint.check_model_id(args.id or default_lora_id(config))
    target = checkpoint.models_cache_dir() / model_id
    if target.exists() and not args.overwrite:
        raise InvalidInputError(f"checkpoint {model_id!r} exists at {target}; pass --overwrite or choose another --id")
    get_dataset(args.dataset, args.split_seed)
    classifier, peft_model = train_lora(config, show_progress_bar=not args.quiet)
    folder = save_lora_classifier(classifier, peft_model, model_id, overwrite=args.overwrite)
    meta = classifier.meta
    t, lora = meta.test, meta.extra["lora"]
    print(f"saved {folder} (merged model) and {folder / 'adapter'} (LoRA r={lora['r']}, "
          f"{lora['trainable_parameters']:,} trained parameters of {lora['total_parameters']:,})")
    print(f"test accuracy on {t['n']}: unmasked {t['unmasked_accuracy']:.4f} (95% CI {t['unmasked_accuracy_ci95_wilson'][0]:.4f}-"
          f"{t['unmasked_accuracy_ci95_wilson'][1]:.4f}), 100% masked {t['masked_100_accuracy']:.4f} (95% CI "
          f"{t['masked_100_accuracy_ci95_wilson'][0]:.4f}-{t['masked_100_accuracy_ci95_wilson'][1]:.4f}); "
          f"{meta.extra['train_seconds']:.0f} s")
    return 0

"""A classifier "fine-tuned elsewhere": the packaged MiniLM fine-tuned plainly on rt with nothing but transformers
and torch (no masking, no engine training code), saved with `save_pretrained` as any user's folder would be.
docs/own-model.md then registers it, measures it, makes it measurable with masked fine-tuning and measures again.

    python bench/finetune_elsewhere.py --out runs/minilm-rt-elsewhere               # 1 epoch on rt's train split
    python bench/finetune_elsewhere.py --out runs/minilm-rt-elsewhere --train-limit 2000
    python bench/finetune_elsewhere.py --smoke                                        # CI: 16 examples

The engine is used only to find the packaged MiniLM folder and rt's seeded train split (so that the test split
measured later is unseen), never to train.
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

from engine.data import get_dataset
from engine.models import resolve_encoder


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="folder to save the classifier to (save_pretrained); required but with --smoke")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--train-limit", type=int, default=None, help="use only the first N training examples")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="CI smoke mode: the packaged tiny instead of MiniLM, 16 training "
                   "examples, 16 tokens, a scratch folder")
    args = p.parse_args()
    if args.smoke:
        args.train_limit, args.max_length, args.batch_size = 16, 16, 8
        args.out = args.out or tempfile.mkdtemp(prefix="finetune-elsewhere-smoke-")
    if not args.out:
        p.error("--out is required")

    torch.manual_seed(args.seed)
    dataset = get_dataset("rt")
    train = dataset.split("train")[: args.train_limit]
    source = resolve_encoder("tiny" if args.smoke else "minilm")
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForSequenceClassification.from_pretrained(
        source, num_labels=2, id2label=dict(enumerate(dataset.classes)), label2id={c: i for i, c in enumerate(dataset.classes)})
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    steps = args.epochs * ((len(train) + args.batch_size - 1) // args.batch_size)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(0.06 * steps), steps)
    generator = torch.Generator().manual_seed(args.seed)
    started = time.time()
    model.train()
    for epoch in range(args.epochs):
        order = torch.randperm(len(train), generator=generator).tolist()
        for step, start in enumerate(range(0, len(train), args.batch_size)):
            rows = [train[i] for i in order[start:start + args.batch_size]]
            enc = tokenizer([r.primary for r in rows], truncation=True, max_length=args.max_length, padding=True,
                            return_tensors="pt")
            loss = model(**enc, labels=torch.tensor([r.label for r in rows])).loss
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            if step % 20 == 0:
                print(f"epoch {epoch + 1} step {step}/{steps // args.epochs} loss {loss.item():.4f} "
                      f"({time.time() - started:.0f} s)", flush=True)
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    print(f"saved {args.out} after {time.time() - started:.0f} s ({len(train)} training examples, {args.epochs} epoch(s))")
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    raise SystemExit(main())

"""Cost of one SMaT step against one plain student step, as a ratio, on this machine.

A plain step: one SGD step of the student on L_sim (no explanation). A scaffolded step: the same with
beta * KL towards a static teacher explanation. A SMaT step: the scaffolded step, plus the differentiable
look-ahead step, the outer loss on a validation batch, the meta-gradient (second order) and Adam on phi_T.
Inputs: rt sentences tokenised by the student's tokenizer (batch 32, padded to the batch's longest), teacher
head scores of MiniLM's shape (6 x 12 = 72 heads; their values do not change the cost).

    ENGINE_THREADS=1 python bench/simulability.py --student tiny --repeats 20
    python bench/simulability.py --student tiny --threads 1 2
    python bench/simulability.py --smoke     # CI: one step each, batch 4
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from engine.runtime import code_version  # noqa: E402


def _split(tokenizer, examples, heads: int, seed: int):
    from engine.models.batch import collate_examples
    from engine.simulability.data import SimSplit

    batch = collate_examples(tokenizer, examples, 64)
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(len(examples), heads, batch.input_ids.shape[1], generator=g)
    scores = scores.masked_fill(~batch.attention_mask.bool()[:, None, :], -1e9)
    return SimSplit(batch.input_ids, batch.attention_mask, batch.token_type_ids, batch.maskable, batch.target, scores)


def measure(student_name: str, repeats: int, batch_size: int, heads: int) -> dict:
    from transformers import AutoTokenizer

    from engine.data import get_dataset
    from engine.models import resolve_encoder
    from engine.simulability.explainers import HeadWeights
    from engine.simulability.meta import meta_gradient, sgd_step
    from engine.simulability.student import new_student

    source = resolve_encoder(student_name)
    tokenizer = AutoTokenizer.from_pretrained(source)
    data = get_dataset("rt")
    train = data.split("train")
    val = data.split("validation")
    student = new_student(source, 2, seed=0)
    student.train()
    teacher = HeadWeights(heads)
    optimiser = torch.optim.Adam(teacher.parameters(), lr=5e-4)
    batches = [_split(tokenizer, train[i * batch_size:(i + 1) * batch_size], heads, i) for i in range(repeats + 2)]
    vals = [_split(tokenizer, val[i * batch_size:(i + 1) * batch_size], heads, 100 + i) for i in range(repeats + 2)]
    hyper = {"lr": 5e-3, "max_grad_norm": 5.0, "weight_decay": 0.01}

    def plain(i):
        sgd_step(student, batches[i], None, 0.0, **hyper)

    def scaffolded(i):
        with torch.no_grad():
            e = teacher(batches[i].teacher_scores, batches[i].attention_mask)
        sgd_step(student, batches[i], e, 5.0, **hyper)

    def smat(i):
        scaffolded(i)
        grad, _ = meta_gradient(student, teacher, batches[i], vals[i], 5.0, **hyper)
        teacher.phi.grad = grad
        torch.nn.utils.clip_grad_norm_(teacher.parameters(), 5.0)
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)

    times = {}
    for name, step in (("plain", plain), ("scaffolded", scaffolded), ("smat", smat)):
        for i in range(2):  # warm-up
            step(i)
        seconds = []
        for i in range(2, repeats + 2):
            start = time.perf_counter()
            step(i)
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                torch.cuda.synchronize()  # time the GPU's work, not its launch
            seconds.append(time.perf_counter() - start)
        times[name] = statistics.median(seconds)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--student", default="tiny")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--heads", type=int, default=72, help="teacher heads (MiniLM: 6 x 12 = 72)")
    ap.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads()])
    ap.add_argument("--smoke", action="store_true", help="CI smoke mode: 1 step each, batch 4, 8 teacher heads, 1 thread")
    args = ap.parse_args()
    if args.smoke:
        args.repeats, args.batch_size, args.heads, args.threads = 1, 4, 8, [1]
    print("| student | threads | plain step (ms) | scaffolded step (ms) | SMaT step (ms) | SMaT / plain | SMaT / scaffolded |")
    print("|---|---|---|---|---|---|---|")
    for threads in args.threads:
        torch.set_num_threads(threads)
        t = measure(args.student, args.repeats, args.batch_size, args.heads)
        print(f"| {args.student} | {threads} | {1000 * t['plain']:.0f} | {1000 * t['scaffolded']:.0f} | "
              f"{1000 * t['smat']:.0f} | {t['smat'] / t['plain']:.2f} | {t['smat'] / t['scaffolded']:.2f} |")
    print(f"median of {args.repeats} steps each, batch {args.batch_size}, rt sentences; code {code_version()}")


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    main()

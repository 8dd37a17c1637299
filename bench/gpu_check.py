"""The CUDA path end to end, in under 10 minutes on one H100: prints a Markdown report and writes it as JSON.

    python bench/gpu_check.py [--out report.json] [--smoke]

Sections (each one's failure is recorded and the others still run):
  environment   the device the engine picks, torch / transformers / CUDA versions, the GPU, determinism flags
  measures      every importance measure of a `tiny` classifier (trained here on `toy`, on the CPU) on CUDA against
                a CPU copy of the same weights: max |difference|, worst Spearman rank agreement over the inputs,
                CUDA rerun bit-equality, and for the measures that offer bf16 its rank agreement with fp32
  bilstm        the same for a BiLSTM-attention model (random weights: the path, not the accuracy, is checked;
                its gradient measures need the LSTM backward outside cuDNN in eval mode)
  masf          MaSF fitted on the CPU and on CUDA: how far the p-values of test inputs move
  recursive     recursive masking (grad-l2 and random) on CUDA against the CPU: masked ids, probabilities
  erasure       every erasure family, mask and delete, on CUDA against the CPU
  determinism   gradient and IG-20 of a base-sized (12 x 768) model rerun with deterministic algorithms on, then off
  throughput    base-sized model: forward rows/s and peak memory, eager vs SDPA attention x fp32 / TF32 / bf16;
                IG-20 at T = 512 (fp32, TF32, bf16): seconds and peak memory
  training      a `tiny` fine-tuning epoch on CUDA (fp32, bf16) and a base-sized training step (fp32 / TF32 / bf16)

Without CUDA it says so, runs a CPU smoke (a few measures on the CPU against a CPU copy, one erasure family, a tiny
throughput) and exits 0; --smoke runs only that (for CI). The packages the GPU machine lacks come as wheels:
scripts/archive/gpu_wheels.sh, and docs/gpu.md says how to run this there.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from _timing import sync  # noqa: E402

TEXTS = ["a great and moving film , truly wonderful from start to end",
         "dull , flat and far too long to bear , the plot never takes off",
         "fine acting but a weak script and a bland ending"]
LONG_TEXT = " ".join(["the film is a patient and often beautiful study of grief, though its second half drifts"] * 60)



def timed(fn, repeats: int = 3) -> float:
    """Median wall seconds of fn() after one warm-up, with the GPU synchronised before the clock stops."""
    fn()
    times = []
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman correlation of two score vectors (average ranks for ties); 1.0 for constant pairs that agree."""
    import numpy as np
    from scipy.stats import spearmanr

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or (np.ptp(a) == 0 and np.ptp(b) == 0):
        return 1.0 if np.array_equal(a, b) else 0.0
    value = spearmanr(a, b).statistic
    return float(value) if value == value else 0.0


def worst_rank_agreement(x, y, maskable) -> float:
    return min(spearman(x[i][maskable[i]], y[i][maskable[i]]) for i in range(len(x)))


def copy_to(classifier, device):
    """A `Classifier` over a deep copy of the same weights on `device`."""
    from engine.models import Classifier

    out = Classifier(copy.deepcopy(classifier.model), classifier.tokenizer, classifier.classes, classifier.max_length,
                     dict(classifier.metadata), device)
    out.folder = classifier.folder
    return out


def tiny_classifier(epochs: int):
    from engine.models import TrainConfig, train_classifier

    return train_classifier(TrainConfig(base_model="tiny", dataset="toy", strategy="masked", epochs=epochs, lr=3e-4,
                                        batch_size=16, seed=0, device="cpu"), show_progress_bar=False)


def bilstm_classifier():
    """A BiLSTM-attention classifier over the toy vocabulary, random weights (GloVe is not needed for the path)."""
    from engine.data import get_dataset
    from engine.models import Classifier
    from engine.models.bilstm import BiLSTMAttentionClassifier, BiLSTMConfig
    from engine.models.word_tokenizer import build_word_tokenizer, count_words

    data = get_dataset("toy")
    texts = [e.primary for e in data.split("train")] + TEXTS
    tokenizer = build_word_tokenizer(sorted(count_words(texts)))
    torch.manual_seed(0)
    config = BiLSTMConfig(vocab_size=len(tokenizer), num_labels=data.num_classes, pad_token_id=tokenizer.pad_token_id,
                          id2label=dict(enumerate(data.classes)), label2id={c: i for i, c in enumerate(data.classes)})
    return Classifier(BiLSTMAttentionClassifier(config).eval(), tokenizer, data.classes, 64,
                      {"id": "bilstm-random", "architecture": "bilstm-attention", "masked_fine_tuned": True}, "cpu")


def compare_measures(cpu, gpu, names, report: dict, bf16: bool = True) -> None:
    """Every measure in `names`: CUDA (gpu) against the CPU copy (cpu)."""
    from engine.importance import MEASURES, get_explainer

    b_cpu, b_gpu = cpu.batch(TEXTS), gpu.batch(TEXTS)
    with torch.no_grad():
        target = cpu.logits(b_cpu).argmax(-1)
    for name in names:
        row: dict = {}
        report[name] = row
        try:
            options = {"seed": 0} if "seed" in MEASURES[name].defaults else {}
            e_cpu = get_explainer(name, cpu, memo=False, **options)
            ok, why = e_cpu.supports()
            if not ok:
                row["skipped"] = why
                continue
            s_cpu = e_cpu.attribute(b_cpu, target).scores
            e_gpu = get_explainer(name, gpu, memo=False, **options)
            t = time.perf_counter()
            s_gpu = e_gpu.attribute(b_gpu, target.to(gpu.device)).scores
            sync()
            row["cuda_seconds"] = round(time.perf_counter() - t, 3)
            again = get_explainer(name, gpu, memo=False, **options).attribute(b_gpu, target.to(gpu.device)).scores
            mask = b_cpu.maskable
            row["max_abs_diff"] = float((s_cpu - s_gpu).abs().max())
            row["scale"] = float(s_cpu.abs().max())
            row["rank_agreement_min"] = round(worst_rank_agreement(s_cpu, s_gpu, mask), 4)
            row["rerun_equal"] = bool(torch.equal(s_gpu, again))
            if bf16 and MEASURES[name].bf16_ok:
                s_bf16 = get_explainer(name, gpu, memo=False, bf16=True, **options).attribute(
                    b_gpu, target.to(gpu.device)).scores
                row["bf16_rank_agreement_min"] = round(worst_rank_agreement(s_gpu, s_bf16, mask), 4)
        except Exception as err:  # recorded: the report goes on
            row["error"] = f"{type(err).__name__}: {err}"
            row["traceback"] = traceback.format_exc(limit=4)


def section_environment(report: dict) -> None:
    import transformers

    from engine.runtime import determinism, pick_device

    device = pick_device()
    report.update({"picked_device": str(device), "torch": torch.__version__, "transformers": transformers.__version__,
                   "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
                   "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                   "python": sys.version.split()[0], **determinism()})


def section_masf(cpu, gpu, report: dict) -> None:
    import numpy as np

    from engine.ood import fit_masf, masf_pvalues

    m_cpu, m_gpu = fit_masf(cpu, save=False), fit_masf(gpu, save=False)
    from engine.data import get_dataset

    test = get_dataset("toy").split("test")[:64]
    b_cpu, b_gpu = cpu.batch_of(test), gpu.batch_of(test)
    p_cpu, p_gpu = masf_pvalues(cpu, m_cpu, b_cpu), masf_pvalues(gpu, m_gpu, b_gpu)
    ratio = np.maximum(p_cpu, p_gpu) / np.maximum(np.minimum(p_cpu, p_gpu), 1e-300)
    report.update({"n": len(test), "share_equal": float(np.mean(p_cpu == p_gpu)),
                   "max_abs_diff": float(np.max(np.abs(p_cpu - p_gpu))), "max_ratio": float(ratio.max()),
                   "share_ratio_over_2": float(np.mean(ratio > 2))})


def section_recursive(cpu, gpu, report: dict) -> None:
    import numpy as np

    from engine.faithfulness.recursive import recursive_masking
    from engine.importance import get_explainer

    for name in ("grad-l2", "random"):
        options = {"seed": 0} if name == "random" else {}
        r_cpu = recursive_masking(cpu, get_explainer(name, cpu, **options), cpu.batch(TEXTS))
        r_gpu = recursive_masking(gpu, get_explainer(name, gpu, **options), gpu.batch(TEXTS))
        report[name] = {
            "steps": len(r_gpu.steps),
            "masked_ids_equal": all(torch.equal(a.input_ids, b.input_ids) for a, b in zip(r_cpu.steps, r_gpu.steps)),
            "max_probability_diff": float(max(np.max(np.abs(a.probability - b.probability))
                                              for a, b in zip(r_cpu.steps, r_gpu.steps)))}


def section_erasure(cpu, gpu, report: dict) -> None:
    import numpy as np

    from engine.faithfulness.erasure import erasure_metrics
    from engine.faithfulness.perturb import REMOVALS
    from engine.importance import get_explainer

    b_cpu, b_gpu = cpu.batch(TEXTS), gpu.batch(TEXTS)
    scores = get_explainer("x-grad-sign", cpu).attribute(b_cpu).scores
    with torch.no_grad():
        target = cpu.logits(b_cpu).argmax(-1)
    for removal in REMOVALS:
        r_cpu = erasure_metrics(cpu, b_cpu, scores, target=target, removal=removal)
        t = time.perf_counter()
        r_gpu = erasure_metrics(gpu, b_gpu, scores.to(gpu.device), target=target.to(gpu.device), removal=removal)
        sync()
        report[removal] = {"seconds": round(time.perf_counter() - t, 3), "metrics": len(r_gpu.values),
                           "max_abs_diff": float(max(np.nanmax(np.abs(r_cpu.values[k] - r_gpu.values[k]))
                                                     for k in r_cpu.values)),
                           "worst_metric": max(r_cpu.values, key=lambda k: np.nanmax(np.abs(r_cpu.values[k] - r_gpu.values[k])))}


def base_classifier(tokenizer, device, attn: str = "eager", layers: int = 12, max_length: int = 512):
    """A base-sized BERT classifier (12 x 768, 12 heads, random weights: timings do not depend on them)."""
    from transformers import BertConfig, BertForSequenceClassification

    from engine.models import Classifier

    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=layers, num_labels=2, vocab_size=len(tokenizer))
    config._attn_implementation = attn
    model = BertForSequenceClassification(config)
    return Classifier(model, tokenizer, ("neg", "pos"), max_length, {"id": f"bert-base-random-{attn}"}, device)


def section_determinism(tokenizer, device, report: dict, layers: int) -> None:
    from engine.importance import get_explainer
    from engine.runtime import set_determinism

    clf = base_classifier(tokenizer, device, layers=layers)
    batch = clf.batch([LONG_TEXT[:1500], LONG_TEXT[:900]])
    for on in (True, False):
        set_determinism(on)
        row = {}
        for name, opts in (("grad-l2", {}), ("ig-sign", {"steps": 20})):
            a = get_explainer(name, clf, memo=False, **opts).attribute(batch, 1).scores
            b = get_explainer(name, clf, memo=False, **opts).attribute(batch, 1).scores
            row[name] = {"rerun_equal": bool(torch.equal(a, b)), "max_abs_diff": float((a - b).abs().max())}
        report["on" if on else "off"] = row
    set_determinism(True)


def _peak_reset():
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _peak_mib():
    return round(torch.cuda.max_memory_allocated() / 2**20) if torch.cuda.is_available() else None


def section_throughput(tokenizer, device, report: dict, T: int, rows: int, layers: int, ig_length: int = 512,
                       precisions=("fp32", "tf32", "bf16")) -> None:
    """Forward throughput at T tokens (rows a pass), then IG-20 of one input of `ig_length` tokens."""
    from engine.importance import get_explainer

    for attn in ("eager", "sdpa"):
        clf = base_classifier(tokenizer, device, attn, layers=layers)
        ids = torch.randint(1000, 2000, (rows, T), device=device)
        am, tt = torch.ones_like(ids), torch.zeros_like(ids)
        for precision in precisions:
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"

            def forward():
                with torch.no_grad(), torch.autocast(device.type, torch.bfloat16, enabled=precision == "bf16"):
                    clf.model(input_ids=ids, attention_mask=am, token_type_ids=tt)
            _peak_reset()
            seconds = timed(forward)
            report[f"forward {attn} {precision}"] = {"rows_per_s": round(rows / seconds, 1), "T": T, "rows": rows,
                                                     "peak_mib": _peak_mib()}
        torch.backends.cuda.matmul.allow_tf32 = False
    clf = base_classifier(tokenizer, device, "eager", layers=layers, max_length=ig_length)
    batch = clf.batch([LONG_TEXT])
    tokens = int(batch.attention_mask.sum())
    for precision in precisions:
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        explainer = get_explainer("ig-sign", clf, memo=False, steps=20, bf16=precision == "bf16")
        _peak_reset()
        seconds = timed(lambda e=explainer: e.attribute(batch, 1), repeats=2)
        report[f"ig-20 T={tokens} {precision}"] = {"seconds": round(seconds, 4), "peak_mib": _peak_mib()}
    torch.backends.cuda.matmul.allow_tf32 = False


def section_training(tokenizer, device, report: dict, tiny_epochs: int, layers: int, T: int, rows: int) -> None:
    from engine.models import TrainConfig, train_classifier

    for precision in ("fp32", "bf16"):
        t = time.perf_counter()
        c = train_classifier(TrainConfig(base_model="tiny", dataset="toy", strategy="masked", epochs=tiny_epochs,
                                         lr=3e-4, batch_size=16, seed=0, device=str(device), precision=precision),
                             show_progress_bar=False)
        report[f"tiny toy {precision}"] = {"seconds": round(time.perf_counter() - t, 2), "epochs": tiny_epochs,
                                           "test_unmasked": c.metadata["test"]["unmasked"],
                                           "train_loss_last": c.metadata["history"][-1]["train_loss"]}
    clf = base_classifier(tokenizer, device, "sdpa", layers=layers)
    model = clf.model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(1000, 2000, (rows, T), device=device)
    am, tt = torch.ones_like(ids), torch.zeros_like(ids)
    labels = torch.randint(0, 2, (rows,), device=device)
    for precision in ("fp32", "tf32", "bf16"):
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"

        def step():
            with torch.autocast(device.type, torch.bfloat16, enabled=precision == "bf16"):
                logits = model(input_ids=ids, attention_mask=am, token_type_ids=tt).logits
            loss = torch.nn.functional.cross_entropy(logits.float(), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        _peak_reset()
        seconds = timed(step)
        report[f"base step {precision}"] = {"seconds": round(seconds, 4), "rows": rows, "T": T, "peak_mib": _peak_mib()}
    torch.backends.cuda.matmul.allow_tf32 = False


def markdown(report: dict) -> str:
    lines = ["# GPU check", ""]
    for section, body in report.items():
        lines.append(f"## {section}")
        if isinstance(body, dict):
            for k, v in body.items():
                if isinstance(v, dict):
                    v = {a: b for a, b in v.items() if a != "traceback"}
                lines.append(f"- {k}: {json.dumps(v, default=str)}")
        else:
            lines.append(str(body))
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="write the report as JSON here (and Markdown beside it)")
    parser.add_argument("--smoke", action="store_true", help="only the quick CPU smoke (what CI runs)")
    args = parser.parse_args(argv)
    from engine.runtime import configure

    configure()
    report: dict = {}
    started = time.perf_counter()
    cuda = torch.cuda.is_available() and not args.smoke

    def run(name, fn):
        body = report.setdefault(name, {})
        t = time.perf_counter()
        try:
            fn(body)
        except Exception as err:
            body["error"] = f"{type(err).__name__}: {err}"
            body["traceback"] = traceback.format_exc(limit=6)
        body["section_seconds"] = round(time.perf_counter() - t, 1)
        print(f"[{time.perf_counter() - started:6.1f} s] {name} done", flush=True)

    run("environment", section_environment)
    if not torch.cuda.is_available():
        print("CUDA is not available on this machine: the GPU part of this check waits for a GPU; running the CPU smoke.")
    cpu_tiny = tiny_classifier(epochs=2 if cuda else 1)
    if not cuda:  # the CPU smoke: the same code paths against a CPU copy, small
        from engine.importance import MEASURES

        other = copy_to(cpu_tiny, torch.device("cpu"))
        run("measures (cpu vs cpu copy)", lambda body: compare_measures(cpu_tiny, other, ["grad-l2", "ig-sign", "loo-sign",
                                                                                          "attention-rollout"], body, bf16=False))
        run("erasure (cpu vs cpu copy)", lambda body: section_erasure(cpu_tiny, other, body))
        run("throughput (cpu, 2 layers)", lambda body: section_throughput(cpu_tiny.tokenizer, torch.device("cpu"), body,
                                                                          T=32, rows=4, layers=2,
                                                                          ig_length=64, precisions=("fp32",)))
        report["summary"] = {"cuda": False, "measures_known": len(MEASURES), "seconds": round(time.perf_counter() - started, 1)}
    else:
        from engine.importance import MEASURES

        gpu = torch.device("cuda")
        gpu_tiny = copy_to(cpu_tiny, gpu)
        run("measures", lambda body: compare_measures(cpu_tiny, gpu_tiny, [m for m in MEASURES if m != "smat"], body))
        cpu_lstm = bilstm_classifier()
        gpu_lstm = copy_to(cpu_lstm, gpu)
        run("bilstm measures", lambda body: compare_measures(cpu_lstm, gpu_lstm, [m for m in MEASURES if m != "smat"], body,
                                                             bf16=False))
        run("masf cpu vs cuda", lambda body: section_masf(cpu_tiny, gpu_tiny, body))
        run("recursive masking", lambda body: section_recursive(cpu_tiny, gpu_tiny, body))
        run("erasure", lambda body: section_erasure(cpu_tiny, gpu_tiny, body))
        run("determinism", lambda body: section_determinism(cpu_tiny.tokenizer, gpu, body, layers=12))
        run("throughput", lambda body: section_throughput(cpu_tiny.tokenizer, gpu, body, T=128, rows=128,
                                                          layers=12))
        run("training", lambda body: section_training(cpu_tiny.tokenizer, gpu, body, tiny_epochs=1, layers=12, T=128,
                                                      rows=32))
        report["summary"] = {"cuda": True, "seconds": round(time.perf_counter() - started, 1),
                             "errors": [k for k, v in report.items() if isinstance(v, dict) and (
                                 "error" in v or any(isinstance(x, dict) and "error" in x for x in v.values()))]}
    text = markdown(report)
    print(text)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
        out.with_suffix(".md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())

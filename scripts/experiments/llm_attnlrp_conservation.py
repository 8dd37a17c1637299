"""AttnLRP's conservation on a prompted LM, measured on a seeded sample of a dataset split: for each sentence, the
explained output f_c (the predicted class's log-odds), the relevance summed over every prompt token, and the gap
between them, split into the head's part (f_c against its linear part f_lin at the final hidden states: nonzero when
a class has several label words) and the network's part (what AttnLRP's softmax rule does not conserve); beside it,
the CPU time of attnlrp and of x-grad-sign (the same forward + backward without the rules), and the Spearman
correlation of attnlrp's slot scores with x-grad-sign's and with loo-sign's, and of x-grad-sign's with loo-sign's
(docs/llm.md#attnlrp).

    ENGINE_THREADS=1 python scripts/experiments/llm_attnlrp_conservation.py --model smollm2-rt-prompt --dataset rt --n 10 \\
        --seed 0 --jsonl results/llm/attnlrp/smollm2-rt-prompt.jsonl
    python scripts/experiments/llm_attnlrp_conservation.py --table results/llm/attnlrp/smollm2-rt-prompt.jsonl \\
        results/llm/attnlrp/smollm2-rt-lora.jsonl

One JSON line per sentence is appended to --jsonl (a rerun skips the sentences already there).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from engine.smoke import SMOKE_HELP, append_row, tiny_prompted, use_scratch_folders


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-rt-prompt")
    parser.add_argument("--dataset", default="rt")
    parser.add_argument("--split", default="test")
    parser.add_argument("--n", type=int, default=10, help="sentences sampled (seeded) from the split")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jsonl", default=None, help="one line per sentence (appended; resumable)")
    parser.add_argument("--table", nargs="+", default=None, help="print the summary table of these JSON-lines files (a row "
                        "each) and exit")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args(argv)
    if args.table:
        print(summary_table(*args.table))
        return 0
    if args.smoke:
        use_scratch_folders()
        classifier = tiny_prompted()
        texts = [(0, "a gripping , funny film", 1), (1, "dull and far too long", 0)]
        args.jsonl = None
    else:
        import numpy as np

        from engine.data import load_dataset
        from engine.models import load_classifier

        classifier = load_classifier(args.model)
        examples = classifier.check_dataset(load_dataset(args.dataset)).split(args.split)
        pick = sorted(np.random.default_rng(args.seed).choice(len(examples), size=min(args.n, len(examples)),
                                                               replace=False).tolist())
        texts = [(i, examples[i].primary, int(examples[i].label)) for i in pick]
    command = "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])])
    measure(classifier, texts, Path(args.jsonl) if args.jsonl else None, command)
    return 0


def _spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic) if len(a) > 2 else float("nan")


def softmax_absorbed(classifier, batch, target: int) -> tuple[float, float]:
    """(what AttnLRP's softmax rule absorbs, summed over every attention softmax of the LM; sum R over the tokens),
    from one more forward + backward under the rules with each softmax's input S and output A recorded: the rule
    passes sum(A g_A) / 2 of the attention's relevance into its softmax branch and returns sum(S g_S) / 2 of it to
    the query and key, so (sum(A g_A) - sum(S g_S)) / 2 is lost there (tests/engine/test_attnlrp.py checks the same
    term against an explicit computation). A diagnostic: torch.nn.functional.softmax is wrapped for this pass only."""
    import torch
    import torch.nn.functional as F

    from engine.importance.lrp_rules import lrp_rules

    records: list[tuple[torch.Tensor, torch.Tensor]] = []
    original = F.softmax

    def recording(x, *args, **kwargs):
        out = original(x, *args, **kwargs)
        if torch.is_grad_enabled() and x.requires_grad:
            records.append((x, out))
        return out

    F.softmax = recording
    try:
        e = classifier.word_embeddings(batch.input_ids).detach().requires_grad_(True)
        with lrp_rules(classifier.model), torch.enable_grad():
            logp = classifier.forward(inputs_embeds=e, attention_mask=batch.attention_mask).logits
            f = classifier.explained_logits(logp)[0, target]
            grads = torch.autograd.grad(f, [e, *[t for pair in records for t in pair]], allow_unused=True)
    finally:
        F.softmax = original
    absorbed = 0.0
    for i, (x, a) in enumerate(records):
        g_x, g_a = grads[1 + 2 * i], grads[2 + 2 * i]
        if g_x is not None and g_a is not None:
            absorbed += float((a.detach().double() * g_a.double()).sum() - (x.detach().double() * g_x.double()).sum()) / 2
    return absorbed, float((e.detach().double() * grads[0].double()).sum())


def measure(classifier, texts, out: Path | None, command: str) -> None:
    """attnlrp, x-grad-sign and loo-sign on each (index, text, label); one row per sentence to `out`."""
    import torch

    from engine.importance import get_explainer
    from engine.runtime import code_version

    done = set()
    if out is not None and out.exists():
        done = {json.loads(line)["index"] for line in out.read_text().splitlines() if line.strip()}
    for j, (idx, text, label) in enumerate(texts):
        if idx in done:
            continue
        batch = classifier.batch([text])
        seconds, scores = {}, {}
        lrp = None
        for name in ("attnlrp", "x-grad-sign", "loo-sign"):
            cpu = time.process_time()
            imp = get_explainer(name, classifier, memo=False).attribute(batch)
            seconds[name] = round(time.process_time() - cpu, 3)
            scores[name] = imp.token_scores(0).tolist()
            if name == "attnlrp":
                lrp = imp
        x = lrp.extras
        absorbed, total_again = softmax_absorbed(classifier, batch, int(lrp.target[0]))
        relevance = x["relevance"][0][batch.attention_mask[0].bool()].double()
        output = float(x["output"][0])
        row = {"index": idx, "text": text, "label": label, "target": int(lrp.target[0]),
               "tokens": int(batch.attention_mask[0].sum()), "slot_tokens": int(batch.maskable[0].sum()),
               "output": output, "head_linear": float(x["head_linear"][0]),
               "relevance_total": float(x["relevance_total"][0]), "slot_relevance": float(x["slot_relevance"][0]),
               "conservation_gap": float(x["conservation_gap"][0]), "network_gap": float(x["network_gap"][0]),
               "head_gap": float(x["head_linear"][0]) - output, "abs_relevance": float(relevance.abs().sum()),
               "first_token_relevance": float(relevance[0]), "softmax_absorbed": absorbed,
               "network_gap_beyond_softmax": float(x["network_gap"][0]) + absorbed,
               "relevance_total_diagnostic_pass": total_again,
               "spearman_x_grad": _spearman(scores["attnlrp"], scores["x-grad-sign"]),
               "spearman_loo": _spearman(scores["attnlrp"], scores["loo-sign"]),
               "spearman_x_grad_loo": _spearman(scores["x-grad-sign"], scores["loo-sign"]), "slot_scores": scores,
               "cpu_seconds": seconds, "torch_threads": torch.get_num_threads(), "model": classifier.id,
               "weights_sha256": classifier.metadata.get("weights_sha256"), "code_version": code_version(),
               "command": command}
        print(f"{j + 1}/{len(texts)} #{idx}: f_c {output:+.3f}, sum R {row['relevance_total']:+.3f} (gap "
              f"{row['conservation_gap']:+.3f} = network {row['network_gap']:+.3f} + head {row['head_gap']:+.3f}; "
              f"softmax absorbed {absorbed:+.3f}); "
              f"rho x-grad {row['spearman_x_grad']:+.2f}, loo {row['spearman_loo']:+.2f}; CPU s {seconds}", flush=True)
        if out is not None:
            append_row(out, row)


def summary_table(*paths: str) -> str:
    """The markdown summary of --jsonl files, one row per file (engine.reports.attnlrp_tables)."""
    from engine.reports.attnlrp_tables import attnlrp_markdown

    return attnlrp_markdown(paths)


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    sys.exit(main())

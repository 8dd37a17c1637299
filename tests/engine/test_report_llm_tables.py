"""The report's IG-convergence and AttnLRP tables (docs/llm.md) read their JSON lines as stated: counts within the
tolerance before and after, the device each row ran on (rows from before it was recorded count as the CPU), and the
agreement of two devices on the sentences both hold."""
from __future__ import annotations

import json

from engine.reports.attnlrp_tables import attnlrp_markdown
from engine.reports.ig_convergence_tables import convergence_markdown, device_agreement_markdown, device_name


def _row(index, initial, final, allowed=0.01, steps=180, runtime=None, f_input=1.0, complete=None):
    row = {"index": index, "initial_gap": initial, "final_gap": final, "allowed_gap": allowed, "difference": 0.5,
           "steps_used": steps, "options": {"max_steps": 180}, "cpu_seconds": 2.0, "wall_seconds": 1.0,
           "f_input": f_input, "f_baseline": 0.5, "complete": abs(final) <= allowed if complete is None else complete}
    if runtime is not None:
        row["runtime"] = runtime
    return row


def test_convergence_counts_before_and_after_and_names_the_device():
    rows = [_row(0, 0.5, 0.005), _row(1, -0.3, 0.02), _row(2, 0.001, 0.001, steps=20)]
    text = convergence_markdown(rows)
    assert "| before: 20 midpoint steps | 3 | 1/3 |" in text
    assert "| after: the check (budget 180 steps) | 3 | 2/3 |" in text
    assert "steps used: 20: 1, 180: 2" in text and text.endswith("device: cpu")
    gpu = [_row(0, 0.5, 0.005, runtime={"device": "cuda", "gpu": "NVIDIA H200"})]
    assert convergence_markdown(gpu).endswith("device: NVIDIA H200")
    assert device_name({"device": "cuda"}) == "cuda" and device_name({}) == "cpu"


def test_device_agreement_is_over_the_shared_sentences_only():
    cpu = [_row(0, 0.5, 0.005), _row(1, -0.3, 0.02), _row(7, 9.0, 9.0)]
    gpu = [_row(0, 0.5 + 2e-5, 0.005, runtime={"device": "cuda", "gpu": "H"}, f_input=1.0 + 3e-5),
           _row(1, -0.3, 0.02, steps=60, runtime={"device": "cuda", "gpu": "H"})]
    text = device_agreement_markdown(cpu, gpu)
    assert text.startswith("The 2 sentences computed on both (cpu against H)")
    assert "of f(x) 3.0e-05" in text and "of the gap before 2.0e-05" in text
    assert "the same steps on 1/2" in text and "the same verdict on 2/2" in text
    assert device_agreement_markdown(cpu, []) == "no sentence in both"


def test_attnlrp_table_one_row_per_file_with_medians(tmp_path):
    rows = [{"model": "m", "output": out, "relevance_total": rel, "conservation_gap": rel - out,
             "network_gap": rel - out, "network_gap_beyond_softmax": 1e-6 * k, "head_gap": 0.0, "abs_relevance": 1.0,
             "spearman_x_grad": 0.1, "spearman_loo": 0.5, "spearman_x_grad_loo": 0.0,
             "cpu_seconds": {"attnlrp": 0.5, "x-grad-sign": 0.4}}
            for k, (out, rel) in enumerate([(1.0, 0.5), (2.0, 0.5), (3.0, 0.0)], start=1)]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = attnlrp_markdown([path]).splitlines()[-1]
    # medians: f_c 2.0, sum R 0.5, |gap| 1.5, |gap|/|f_c| median of (50%, 75%, 100%) = 75%; largest beyond-softmax 3e-6
    assert line.startswith("| m | 3 | +2.000 | +0.500 | 1.500 | 75% | 1.500 | 3.0e-06 | 0.000 |")
    assert line.endswith("| 0.50 / 0.40 |")

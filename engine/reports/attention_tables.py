"""The docs' table of Wiegreffe & Pinter's attention diagnostics on rt beside their published SST row."""
from __future__ import annotations

from pathlib import Path


def attention_table(root: Path) -> str:
    """W&P's attention diagnostics on rt (results/attention/default) beside their published SST row."""
    from engine.attention.results import load_attention_results
    from engine.results.published import load_published

    ours, _, _ = load_attention_results("default", "rt", root)  # the summary file, or the run's store cells
    wp, _ = load_published("wiegreffe_pinter")
    sst = wp[wp["dataset"] == "SST"].set_index("setting")
    mlp = ours["guided_mlp"]
    adv = ours["best_adversary"]
    rows = [
        ("base BiLSTM-attention", ours["base"]["f1_positive"], f"{sst.loc['base_reproduced', 'f1']:.3f} (reproduced)"),
        ("frozen uniform attention", ours["uniform"]["f1_positive"], f"{sst.loc['uniform', 'f1']:.3f}"),
        ("guided MLP: uniform weights", mlp["uniform"]["f1_positive"], f"{sst.loc['mlp_uniform', 'f1']:.3f}"),
        ("guided MLP: its own trained attention", mlp["trained"]["f1_positive"], f"{sst.loc['mlp_trained', 'f1']:.3f}"),
        ("guided MLP: base LSTM's attention", mlp["base_lstm"]["f1_positive"], f"{sst.loc['mlp_base_lstm', 'f1']:.3f}"),
        ("guided MLP: adversary's attention", mlp["adversary"]["f1_positive"], f"{sst.loc['mlp_adversary', 'f1']:.3f}"),
    ]
    lines = ["| setting | this project (rt) | W&P, SST (published) |", "|---|---|---|"]
    lines += [f"| {name} | {value:.3f} | {published} |" for name, value, published in rows]
    a = sst.loc["adversary"]
    lines.append(f"| best adversary with JSD > 0.4: lambda, F1, TVD, JSD | {adv['lambda']:g}, {adv['f1_positive']:.3f}, "
                 f"{adv['tvd']:.3f}, {adv['jsd']:.3f} | {a['lambda']:g}, {a['f1']:.3f}, {a['tvd']:.3f}, {a['jsd']:.3f} |")
    return "\n".join(lines)

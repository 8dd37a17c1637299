"""A prompted LLM (random weights of the packaged config, see random_llm.py) on CUDA against the same weights on
the CPU, float32: the class probabilities and every live measure's scores (max |difference|, Spearman), then
bf16 on CUDA against fp32 on CUDA. Prints one JSON line per model. AGREE_DEVICES="cpu cpu" for a dry run."""
import json
import os
import sys
import time
import traceback

import numpy as np
import torch
from scipy.stats import spearmanr

from engine.explain import LIVE_MEASURES
from engine.importance import get_explainer
from engine.models import load_classifier

DEVICES = os.environ.get("AGREE_DEVICES", "cpu cuda").split()
TEXT = "a gripping , funny and often moving portrait of a family , though the last act drags a little"


def sync():
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


for model_id in sys.argv[1:]:
    out = {"model": model_id, "devices": DEVICES}
    try:
        cls = [load_classifier(model_id, device=d, dtype="float32") for d in DEVICES]
        b = [c.batch([TEXT]) for c in cls]
        with torch.no_grad():
            p = [torch.softmax(c.logits(x).float(), -1).cpu() for c, x in zip(cls, b)]
        out["prob_max_diff"] = float((p[0] - p[1]).abs().max())
        target = torch.tensor([int(p[0].argmax())])
        mask = b[0].maskable[0].cpu().numpy().astype(bool)
        out["T"], out["N"] = int(b[0].input_ids.shape[1]), int(mask.sum())
        for m in LIVE_MEASURES:
            s = []
            for i, (c, x) in enumerate(zip(cls, b)):
                sync()
                t = time.perf_counter()
                s.append(get_explainer(m, c, memo=False).attribute(x, target).scores[0].float().cpu().numpy()[mask])
                sync()
                out[f"{m} s[{DEVICES[i]}]"] = round(time.perf_counter() - t, 3)
            out[f"{m} max|diff|"] = float(np.abs(s[0] - s[1]).max())
            out[f"{m} spearman"] = float(spearmanr(s[0], s[1]).statistic)
        del cls
        fp = load_classifier(model_id, device=DEVICES[1], dtype="float32")
        bf = load_classifier(model_id, device=DEVICES[1], dtype="bfloat16")
        bp, bb = fp.batch([TEXT]), bf.batch([TEXT])
        for m in LIVE_MEASURES:
            x = get_explainer(m, fp, memo=False).attribute(bp, target).scores[0].float().cpu().numpy()[mask]
            y = get_explainer(m, bf, memo=False).attribute(bb, target).scores[0].float().cpu().numpy()[mask]
            out[f"{m} bf16 spearman"] = float(spearmanr(x, y).statistic)
            out[f"{m} bf16 max|diff|/max|fp32|"] = float(np.abs(x - y).max() / max(np.abs(x).max(), 1e-12))
    except Exception as err:
        out["error"] = f"{type(err).__name__}: {err}"
        out["traceback"] = traceback.format_exc(limit=5)
    print(json.dumps(out), flush=True)

"""Regenerate tests/data/naopc_reference.json: run Edin et al.'s exact permutation search and beam
(JoakimEdin/naopc @ 0976aa3, read from a local clone; nothing of theirs is copied into the project) on tables of
masked-set probabilities of the toy model.

    python tests/data/make_naopc_reference.py PATH/TO/naopc-clone tests/data/naopc_reference.json

Their numba @jit decorator is dropped (same semantics in plain Python); their beam module's tokenizer helper is
loaded from their clone too. Needs transformers (installed) but no network.
"""
import itertools
import json
import os
import subprocess
import sys
import types

import numpy as np
import torch

sys.setrecursionlimit(10000)
REPO = sys.argv[1]


def theirs(path):
    return subprocess.run(["git", "-C", REPO, "show", f"0976aa3:{path}"], check=True, capture_output=True, text=True).stdout


src = theirs("src/evaluation/naopc_exact/calculate_aopc_limits.py")
# keep only their get_key and permutations functions; drop numba's @jit (same semantics in plain Python)
start = src.index("@jit()\ndef get_key")
end = src.index("# compile the functions")
ns = {"np": np}
exec(src[start:end].replace("@jit()\n", ""), ns)
permutations, get_key = ns["permutations"], ns["get_key"]
# their beam module imports a tokenizer helper it only uses with word maps
sys.modules["src"] = types.ModuleType("src")
sys.modules["src.utils"] = types.ModuleType("src.utils")
tok = types.ModuleType("src.utils.tokenizer")
exec(theirs("src/utils/tokenizer.py"), tok.__dict__)
sys.modules["src.utils.tokenizer"] = tok
bns = {}
exec(theirs("src/evaluation/naopc_beam/bound_approximation_methods.py"), bns)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from engine.data import get_dataset  # noqa: E402
from engine.models import TrainConfig, train_classifier  # noqa: E402

clf = train_classifier(TrainConfig(base_model="tiny", dataset="toy", strategy="masked", epochs=3, lr=3e-4, batch_size=16, seed=0), show_progress_bar=False)
rows = [e for e in get_dataset("toy").split("test")][:8]
fixtures = []
for e in rows:
    batch = clf.batch_of([e])
    ids = batch.input_ids[0]
    n = int(batch.maskable[0].sum())
    if n > 7:
        continue
    with torch.no_grad():
        target = int(clf.logits(batch).argmax(-1)[0])
    # p_c for every subset of the n tokens (positions 1..n: [CLS] tokens [SEP], no padding)
    table = {}
    for r in range(n + 1):
        for sub in itertools.combinations(range(1, n + 1), r):
            x = ids.clone()
            x[list(sub)] = clf.mask_token_id
            with torch.no_grad():
                p = torch.softmax(clf.logits(batch, x[None]).double(), -1)[0, target].item()
            table[",".join(map(str, sub))] = p
    # their exact search: keys "1,2," of sorted features 1..n, values p(x) - p(x without them)
    d = {get_key(np.array(sorted(map(int, k.split(","))))) if k else "": table[""] - v for k, v in table.items()}
    lookup = {"min": 100.1, "max": 0.0}
    vec = np.arange(1, n + 1)
    permutations(vec, vec.copy(), vec.copy(), lookup, d)
    full = d[get_key(vec)]
    U, L = (lookup["max"] + full) / n, (lookup["min"] + full) / n
    # their beam (width 5, duplicates kept) through a model that reads p_c off the table
    class Table(torch.nn.Module):
        def forward(self, input_ids):
            out = []
            for x in input_ids:
                key = ",".join(str(i) for i in range(1, n + 1) if x[i] == clf.mask_token_id)
                p = table[key]
                lp = [0.0, 0.0]
                lp[target], lp[1 - target] = np.log(p), np.log(1 - p)
                out.append(lp)
            return types.SimpleNamespace(logits=torch.tensor(out))
    solver = bns["get_pertubation_solver_callable"](Table(), baseline_token_id=clf.mask_token_id, cls_token_id=int(ids[0]),
                                                     eos_token_id=int(ids[n + 1]), beam_size=5,
                                                     word_map_callable=lambda x: torch.arange(x.shape[1]))
    desc, asc = solver(ids[: n + 2][None], torch.tensor([target]), None, "cpu")
    up_order = sorted(range(1, n + 1), key=lambda f: -float(desc[f]))
    low_order = sorted(range(1, n + 1), key=lambda f: float(asc[f]))
    def J(order):
        return sum(table[""] - table[",".join(map(str, sorted(order[:k])))] for k in range(1, n + 1)) / n
    fixtures.append({"uid": e.uid, "text": e.primary, "n": n, "target": target, "table": table,
                     "their_exact_upper": U, "their_exact_lower": L,
                     "their_beam5_upper_order": up_order, "their_beam5_lower_order": low_order,
                     "their_beam5_upper": J(up_order), "their_beam5_lower": J(low_order)})
    print(e.uid, n, U, L, J(up_order), J(low_order))
json.dump(
    {"source": "JoakimEdin/naopc@0976aa3 src/evaluation/naopc_exact/calculate_aopc_limits.py (permutations) and "
           "src/evaluation/naopc_beam/bound_approximation_methods.py (beam_size=5), run on these tables",
           "model": "tiny masked-fine-tuned on toy, 3 epochs, seed 0 (tests/conftest.py toy_classifier)",
           "inputs": fixtures}, open(sys.argv[2], "w"), indent=1)

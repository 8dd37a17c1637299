"""CC-SHAP (Parcalabescu & Frank, ACL 2024): do the input's contributions to the answer and to the explanation agree?
A self-consistency score, not a test against ground truth (docs/methods.md#self-explanation-tests-beyond-madsen-et-al).

For an input x of n words (whitespace-separated; the features) with prediction c:
    E               the model's free-text explanation of c for x (engine.selfexplain.free_text.why_request), judged
                    only when it is an explanation (else "not parsable")
    v_ans(S)        the explained logit of c (the classifier's, e.g. log-odds) on x with the words outside S replaced
                    by the mask text (consecutive masked words as one mask, as the engine's [REDACTED])
    v_exp(S)        the mean log-probability per token of E, teacher-forced after the same request made with that
                    masked x (the request's other words, and the prediction named in it, unchanged)
    phi_ans, phi_exp  Shapley values of the n words for v_ans and v_exp, estimated on the SAME `permutations` random
                    orders (Shapley sampling: the mean marginal contribution of each word over the orders)
    cc_shap         cosine similarity of phi_ans and phi_exp, in [-1, 1] (higher = more self-consistent)

Differences from the authors' code: it explains each generated token with the `shap` library's partition explainer
and averages per-token attributions; here the explanation's value is the mean token log-probability, and Shapley
values are sampled (stated per run: `permutations`), so one function of the coalition serves the whole explanation.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from engine.errors import Cancelled
from engine.selfexplain.check import check_prompted, classify, label_words
from engine.selfexplain.free_text import check_free_text, why_request
from engine.selfexplain.generation import Generator


@dataclass
class CCShapRecord:
    index: int
    text: str
    prediction: str
    verdict: str                   # "explained" or "not parsable"
    reason: str = ""
    answer: str | None = None
    words: list[str] = field(default_factory=list)
    phi_answer: list[float] = field(default_factory=list)
    phi_explanation: list[float] = field(default_factory=list)
    cc_shap: float | None = None
    permutations: int = 0
    coalitions: int = 0
    cached: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def masked_text(words: list[str], keep: frozenset[int], mask: str) -> str:
    """The words in `keep` as they are, every run of other words as one `mask`."""
    out, prev_masked = [], False
    for i, w in enumerate(words):
        if i in keep:
            out.append(w)
            prev_masked = False
        elif not prev_masked:
            out.append(mask)
            prev_masked = True
    return " ".join(out)


def shapley_from_values(n: int, orders: list[list[int]], value: dict[frozenset[int], float]) -> np.ndarray:
    """phi [n]: mean over `orders` of each word's marginal contribution v(S + i) - v(S) as the order adds it."""
    phi = np.zeros(n)
    for order in orders:
        s: frozenset[int] = frozenset()
        for i in order:
            t = s | {i}
            phi[i] += value[t] - value[s]
            s = t
    return phi / max(len(orders), 1)


@torch.no_grad()
def answer_values(classifier, texts: list[str], target: int, batch_size: int = 16) -> list[float]:
    """The explained logit of class `target` for each text."""
    out = []
    for start in range(0, len(texts), batch_size):
        logits = classifier.logits(classifier.batch(texts[start:start + batch_size]))
        out.extend(classifier.explained_logits(logits)[:, target].double().tolist())
    return out


@torch.no_grad()
def explanation_values(classifier, prompts: list[str], explanation: str, batch_size: int = 8) -> list[float]:
    """Mean log-probability per token of `explanation` after each prompt (teacher forcing; the explanation's
    tokens are the same ids after every prompt)."""
    tok = classifier.tokenizer
    tail = tok(explanation, add_special_tokens=False)["input_ids"]
    if not tail:
        return [0.0] * len(prompts)
    out = []
    for start in range(0, len(prompts), batch_size):
        rows = [tok(p, add_special_tokens=False)["input_ids"] + tail for p in prompts[start:start + batch_size]]
        T = max(len(r) for r in rows)
        ids = torch.full((len(rows), T), int(tok.pad_token_id), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, r in enumerate(rows):
            ids[i, :len(r)], mask[i, :len(r)] = torch.tensor(r), 1
        ids, mask = ids.to(classifier.device), mask.to(classifier.device)
        hidden = classifier.model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
        for i, r in enumerate(rows):
            n0 = len(r) - len(tail)
            logp = classifier.vocabulary_log_probs(hidden[i, n0 - 1:len(r) - 1])  # position j predicts token j + 1
            out.append(float(logp[torch.arange(len(tail)), torch.tensor(tail, device=logp.device)].double().mean()))
    return out


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else float("nan")


def ccshap_test(classifier, examples, *, permutations: int = 4, seed: int = 0, generator: Generator | None = None,
                progress: Callable[[int, int], None] | None = None,
                should_stop: Callable[[], bool] | None = None) -> list[CCShapRecord]:
    """One record per example (objects with `.primary`): see the module docstring."""
    check_prompted(classifier)
    generator = generator or Generator(classifier)
    rng = random.Random(seed)
    labels = label_words(classifier)
    mask = classifier.spec.replacement_text if classifier.spec.replacement == "redacted" else "[REDACTED]"
    examples = list(examples)
    out = []
    for idx, ex in enumerate(examples):
        if should_stop is not None and should_stop():
            raise Cancelled("CC-SHAP cancelled")
        text = ex.primary
        prediction, _ = classify(classifier, text)
        rec = CCShapRecord(index=idx, text=text, prediction=prediction, verdict="not parsable")
        request = why_request(text, prediction)
        rec.answer = generator.generate(generator.chat_prompt(request), should_stop=should_stop)
        rec.cached = generator.last_cached
        ok, why = check_free_text(rec.answer, text, labels, request=request, mask=mask)
        if not ok:
            rec.reason = why
            out.append(rec)
            continue
        words = text.split(" ")
        n = len(words)
        orders = [rng.sample(range(n), n) for _ in range(permutations)]
        coalitions = sorted({frozenset(o[:j]) for o in orders for j in range(n + 1)}, key=lambda s: (len(s), sorted(s)))
        texts = [masked_text(words, s, mask) for s in coalitions]
        target = list(classifier.classes).index(prediction)
        v_ans = dict(zip(coalitions, answer_values(classifier, texts, target)))
        prompts = [generator.chat_prompt(why_request(t, prediction)) for t in texts]
        v_exp = dict(zip(coalitions, explanation_values(classifier, prompts, rec.answer)))
        phi_a, phi_e = shapley_from_values(n, orders, v_ans), shapley_from_values(n, orders, v_exp)
        rec.verdict, rec.words = "explained", words
        rec.phi_answer, rec.phi_explanation = phi_a.tolist(), phi_e.tolist()
        rec.cc_shap, rec.permutations, rec.coalitions = cosine(phi_a, phi_e), permutations, len(coalitions)
        out.append(rec)
        if progress is not None:
            progress(idx + 1, len(examples))
    return out


def summarise_ccshap(records) -> dict:
    from engine.stats import bootstrap_ci

    scores = [r.cc_shap for r in records if r.verdict == "explained" and r.cc_shap is not None and r.cc_shap == r.cc_shap]
    mean, low, high = bootstrap_ci(scores) if scores else (float("nan"),) * 3
    return {"n": len(records), "n_explained": len(scores), "not_parsable": sum(r.verdict != "explained" for r in records),
            "cc_shap": mean, "cc_shap_ci": (low, high)}

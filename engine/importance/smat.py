"""smat: the head-weighted attention explainer learned by SMaT (Fernandes et al. 2022) for this checkpoint.

    score_t = softmax over non-pad tokens of sum_h lambda_h s^h_t

s^h_t: head h's pre-softmax attention logits to token t averaged over the non-pad queries (all layers' heads,
layer-major; engine.importance.head_scores); lambda: the sparse head weights learned by
`python -m engine simulability ... --explainers smat`, read from `smat_head_weights.json` beside the
checkpoint. Unit: probability ([CLS], [SEP] and a bAbI question share the mass, so scores on the maskable
tokens sum to less than 1); unsigned; target-independent (the target is still recorded).
"""
from __future__ import annotations

import torch

from engine.importance.explainer import Explainer
from engine.importance.registry import register
from engine.importance.types import Call


@register
class SmatLearned(Explainer):
    """smat: attention logits of all heads weighted by the head weights SMaT learned for this model (probability)."""

    name = "smat"
    cost_tier = 5
    bf16_ok = False

    def __init__(self, classifier, **kwargs):
        super().__init__(classifier, **kwargs)
        # Which learned weights made the scores: part of the provenance and of the memo key (a rerun of the
        # simulability command replaces the file, and the scores with it).
        record = self._record()
        if record is not None:
            import hashlib
            import json

            text = json.dumps(record["weights"])
            self.options["head_weights_sha256"] = hashlib.sha256(text.encode()).hexdigest()[:16]

    def _record(self) -> dict | None:
        from engine.importance.head_weights import read_head_weights

        return read_head_weights(getattr(self.classifier, "folder", None))

    def supports(self) -> tuple[bool, str]:
        from engine.errors import NotApplicableError
        from engine.importance.head_scores import head_count

        try:
            layers, heads = head_count(self.classifier.model)
        except NotApplicableError as err:
            return False, str(err)
        record = self._record()
        if record is None:
            return False, ("no learned head weights stored for this checkpoint: run `python -m engine simulability "
                           f"--teacher {self.classifier.id} --explainers smat` first")
        if (record["layers"], record["heads"]) != (layers, heads):
            return False, (f"the stored head weights are for {record['layers']} x {record['heads']} heads, the model "
                           f"has {layers} x {heads}")
        return True, ""

    def _scores(self, call: Call):
        from engine.importance.head_scores import head_weighted, model_head_scores

        record = self._record()
        b = call.batch
        _, scores = model_head_scores(self.classifier.model, b.input_ids, b.attention_mask, b.token_type_ids)
        weights = torch.tensor(record["weights"], dtype=scores.dtype, device=scores.device)
        extras = {"learned_from": record.get("provenance", {})}
        return head_weighted(scores, weights, b.attention_mask), extras

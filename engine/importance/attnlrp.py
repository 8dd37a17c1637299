"""AttnLRP (Achtibat et al., ICML 2024, "AttnLRP: attention-aware layer-wise relevance propagation for
transformers"): the relevance of every input token in one forward and one backward pass, with lxt 2.1's rules for
attention, normalisation and the gated MLP (engine/importance/lrp_rules.py), on prompted language models of the
families lxt covers (Llama, e.g. SmolLM2; Gemma 3; Qwen2/3).

    R_t = sum_h e_{t,h} * g~_{t,h}      g~ = the gradient of f_c w.r.t. the word embeddings e [B, T, H], with
                                        every patched layer's backward replaced by its LRP rule

f_c is what every measure of a prompted LM explains (`Classifier.explained_logits`: the class log-odds by default,
or log p(c) when the prompt spec says logit 'log-prob').

Conservation (the LRP property, docs/llm.md#attnlrp): summed over all the prompt's tokens (instruction, examples and
template included, not only the scored input slot), R_t adds up to

    f_lin = sum_{positions, h} hfin * d f_c / d hfin      hfin = the LM's final hidden states (after its last norm)

up to what AttnLRP's rules do not conserve (the attention softmax's gradient x input; float rounding); f_lin = f_c
exactly when f_c is linear in the LM head's logits: two classes, one single-token label word each, log-odds and no
final soft-capping (then f_c = z[word_c] - z[word_other]). With several label words per class (SmolLM2's
"positive"/"Positive") f_c is a difference of log-sum-exps and f_lin misses it by the within-class entropies.
`extras` reports per input: output (f_c), relevance_total (sum over all tokens), slot_relevance (over the maskable
tokens, which are the scores), head_linear (f_lin), conservation_gap (relevance_total - f_c), network_gap
(relevance_total - f_lin) and relevance (every token's R_t [B, T], prompt included).
"""
from __future__ import annotations

import torch

from engine.importance.batching import explained, halve_after_oom
from engine.importance.explainer import Explainer, PassEstimate
from engine.importance.lrp_rules import SUPPORTED, check_supported, lrp_rules
from engine.importance.registry import register
from engine.importance.types import Call
from engine.models.kinds import ModelKind


@register
class AttnLRP(Explainer):
    """attnlrp: AttnLRP relevance of each token (lxt 2.1's rules; one forward + one backward pass), signed.

    Gradient x input of the word embedding with AttnLRP's backward rules for attention, RMSNorm and the gated MLP,
    for prompted language models of the Llama, Gemma 3 and Qwen2/3 families. Unit: logit (relevance of the
    explained log-odds; over all prompt tokens it sums to about f_c, see extras and docs/llm.md#attnlrp)."""

    name = "attnlrp"
    cost_tier = 1
    signed = True

    def passes(self, n_tokens: int) -> PassEstimate:
        return PassEstimate(forward=1, backward=1)

    def supports(self) -> tuple[bool, str]:
        if self.classifier.kind is not ModelKind.PROMPTED:
            return False, ("AttnLRP is offered for prompted language models (models add FOLDER --prompt) of the "
                           f"families lxt's rules cover here: {SUPPORTED}")
        return check_supported(self.classifier.model)

    def _scores(self, call: Call):
        b = call.batch
        B, T = b.input_ids.shape
        e_all = self.classifier.word_embeddings(b.input_ids).detach()
        relevance = torch.zeros(B, T, dtype=torch.float64, device=e_all.device)
        output = torch.zeros(B, dtype=torch.float64, device=e_all.device)
        head_linear = torch.zeros(B, dtype=torch.float64, device=e_all.device)
        final_norm = getattr(self.classifier.model.base_model, "norm", None)
        step = self.rows_per_pass(T, backward=True)
        start = 0
        with lrp_rules(self.classifier.model):
            while start < B:
                call.check_stop()
                sl = slice(start, min(start + step, B))
                L = int(b.attention_mask[sl].sum(1).max())
                try:
                    r, y, lin = self._relevance(e_all[sl, :L], b.attention_mask[sl, :L], call.target[sl], final_norm)
                except torch.cuda.OutOfMemoryError as error:
                    step = halve_after_oom(step, error, e_all.device)
                    continue
                relevance[sl, :L], output[sl], head_linear[sl] = r, y, lin
                start = sl.stop
        total = relevance.sum(1)
        slot = torch.where(b.maskable, relevance, torch.zeros((), dtype=relevance.dtype, device=relevance.device)).sum(1)
        extras = {"output": output.cpu(), "relevance_total": total.cpu(), "slot_relevance": slot.cpu(),
                  "head_linear": head_linear.cpu(), "conservation_gap": (total - output).cpu(),
                  "network_gap": (total - head_linear).cpu(), "relevance": relevance.float().cpu()}
        return relevance, extras

    def _relevance(self, embeds: torch.Tensor, attention_mask: torch.Tensor, target: torch.Tensor, final_norm) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One forward + backward of rows embeds [n, L, H] under the rules: (R [n, L], f_c [n], f_lin [n]) in float64."""
        finals: list[torch.Tensor] = []
        hook = None
        if final_norm is not None:  # the final hidden states, to split the gap into head and network (f_lin)
            hook = final_norm.register_forward_hook(lambda _m, _i, out: finals.append(out))
        try:
            e = embeds.detach().requires_grad_(True)
            with torch.enable_grad():
                logp = self.classifier.forward(inputs_embeds=e, attention_mask=attention_mask).logits
                f = explained(self.classifier, logp)
                y = f.gather(1, target[:, None]).squeeze(1)
                grads = torch.autograd.grad(y.sum(), [e, *finals], allow_unused=True)
        finally:
            if hook is not None:
                hook.remove()
        r = (e.detach().to(torch.float64) * grads[0].to(torch.float64)).sum(-1)
        lin = torch.zeros(e.shape[0], dtype=torch.float64, device=e.device)
        for h, g in zip(finals, grads[1:]):
            if g is not None:
                part = (h.detach().to(torch.float64) * g.to(torch.float64)).sum(-1)  # [rows, positions]
                # teacher-forced multi-token words run rows x words: fold them back onto their input row
                lin += part.reshape(e.shape[0], -1).sum(1)
        if not finals:
            lin = torch.full_like(lin, float("nan"))
        return r, y.detach().to(torch.float64), lin


def conservation_note(extras, i: int = 0) -> str | None:
    """One line on input `i`'s AttnLRP conservation (what the CLI prints and the Explain page shows under the
    heatmap), or None when `extras` are not AttnLRP's. `extras`: an Importance's (tensors) or an Explanation's
    (lists)."""
    if "relevance_total" not in extras or "network_gap" not in extras:
        return None

    def at(key):
        value = extras[key][i]
        return float(value.item() if isinstance(value, torch.Tensor) else value)

    output, total, slot = at("output"), at("relevance_total"), at("slot_relevance")
    network, head = at("network_gap"), at("head_linear") - at("output")
    return (f"relevance over every prompt token {total:+.4f} (input slot {slot:+.4f}) against the explained output "
            f"{output:+.4f}: gap {total - output:+.4f}, of which {network:+.4f} not conserved by the attention softmax "
            f"rule and {head:+.4f} from the label-word head (docs/llm.md#attnlrp)")

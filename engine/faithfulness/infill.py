"""Infill removal operators (after ICE, ice-faithfulness 1.0.1, EMNLP 2026 Findings): a removed token is replaced
by another real token instead of [MASK], so the text keeps its length and reads closer to a natural input.

    retrieval   each removed position gets a token drawn from the tokens of other examples of the same data (the
                model's dataset, training split: the token pool), so the replacement follows the data's own token
                frequencies
    mlm         each removed position gets a masked LM's most likely token there, given the input with every
                removed position masked (the original token and special tokens excluded: an infill that gave the
                token back would not remove it); the packaged `tiny` encoder's MLM head by default, or any masked LM
                whose tokenizer has the classifier's vocabulary

Both are deterministic: retrieval draws per input from a generator seeded by (seed, the input's token ids), so the
same position of the same input gets the same replacement in every perturbation of it and on every rerun; the MLM's
choice is its argmax. Every metric whose perturbations go through `perturb.perturbed_rows` with the classifier's
infill uses them (the erasure metrics, the randomisation test, faithfulness correlation, infidelity, Sensitivity-n;
F-Fidelity's draws keep [MASK]), and the MaSF p-values of the
perturbed inputs say whether infill really stays in distribution, which ICE assumes and does not test. The soft
metrics (embedding dimensions dropped) and recursive masking (its own [MASK] loop) do not take them.

    op = infill_operator(classifier, "retrieval")       # a classifier twin carrying `infill`
    erasure_metrics(op, batch, scores)                  # comprehensiveness ... with retrieval infill
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from engine.errors import InvalidInputError, NotApplicableError
from engine.faithfulness.registry import INFILL_OPERATORS

#: training examples whose tokens make the retrieval pool (all of rt's 8,530 would cost seconds of tokenising for
#: no change in a unigram draw: 2,000 sentences carry about 45,000 tokens)
POOL_EXAMPLES = 2000


def _special_ids(tokenizer) -> set[int]:
    return {int(i) for i in (tokenizer.all_special_ids or [])}


@dataclass
class RetrievalInfill:
    """Tokens drawn uniformly from `pool` [N] (token ids of other examples of the data; each token as often as it
    occurs there). `seed` seeds the draws with the input's own token ids (`fill`)."""

    pool: torch.Tensor
    seed: int = 0
    name: str = "retrieval"

    def fill(self, ids: torch.Tensor, removed: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        """ids [R, T] (the source inputs' own ids) with the `removed` [R, T] positions replaced by draws from the
        pool. A row's draws come from a generator seeded by (seed, its real token ids), so a removed position gets
        the same token in every perturbation of the same input, whatever the batching."""
        from engine.importance.random_baseline import row_seed

        out = ids.clone()
        for r in range(ids.shape[0]):
            if not bool(removed[r].any()):
                continue
            g = torch.Generator().manual_seed(row_seed(self.seed, ids[r][attention[r].bool()]))
            draw = self.pool[torch.randint(len(self.pool), (ids.shape[1],), generator=g)].to(ids.device)
            out[r] = torch.where(removed[r], draw, ids[r])
        return out


@dataclass
class MLMInfill:
    """A masked LM's argmax at each removed position, given the row with every removed position masked.

    mlm: a transformers masked LM (its forward gives .logits [R, T, V]); mask_id: its [MASK] id; banned: token ids
    never filled in (special tokens)."""

    mlm: torch.nn.Module
    mask_id: int
    banned: tuple[int, ...]
    name: str = "mlm"

    @torch.no_grad()
    def fill(self, ids: torch.Tensor, removed: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        """ids [R, T] with the `removed` positions replaced by the MLM's most likely token other than the original
        one and the special tokens (one MLM forward over the R rows)."""
        if not bool(removed.any()):
            return ids
        device = next(self.mlm.parameters()).device
        masked = torch.where(removed, torch.full_like(ids, self.mask_id), ids).to(device)
        logits = self.mlm(input_ids=masked, attention_mask=attention.to(device)).logits.float()  # [R, T, V]
        logits[..., list(self.banned)] = float("-inf")
        logits.scatter_(-1, ids.to(device)[..., None], float("-inf"))  # never the removed token itself
        best = logits.argmax(-1).to(ids.device)
        return torch.where(removed, best, ids)


def retrieval_pool(classifier, dataset: str | None = None, split: str = "train", limit: int = POOL_EXAMPLES,
                   split_seed: int = 0) -> torch.Tensor:
    """[N] token ids of the first `limit` examples of `dataset`'s `split` (default: the model's own dataset),
    tokenised by the classifier's tokenizer, special tokens left out.

    Raises:
        NotApplicableError: a model without a dataset of its own and none given."""
    from engine.data import get_dataset

    name = dataset or (getattr(classifier, "metadata", None) or {}).get("dataset")
    if not name:
        raise NotApplicableError("retrieval infill draws tokens from the model's data: this model names no dataset "
                                 "(give one)")
    examples = get_dataset(name, split_seed=split_seed).split(split)[:limit]
    texts = [t for e in examples for t in (e.primary, e.auxiliary) if t]
    special = _special_ids(classifier.tokenizer)
    ids = [i for row in classifier.tokenizer(texts, add_special_tokens=False)["input_ids"] for i in row
           if i not in special]
    if not ids:
        raise NotApplicableError(f"retrieval infill: the {split} split of {name!r} gives no token")
    return torch.tensor(ids, dtype=torch.long)


_VOCAB_MATCH: dict[tuple[str, int], bool] = {}


def mlm_compatible(classifier, name: str = "tiny") -> bool:
    """Whether the masked LM `name` has the classifier's vocabulary (so its ids are the model's tokens); memoised per
    (name, tokenizer) for the process."""
    tokenizer = getattr(classifier, "tokenizer", None)
    if tokenizer is None or getattr(tokenizer, "mask_token_id", None) is None:
        return False
    key = (name, str(getattr(tokenizer, "name_or_path", "")), len(tokenizer.get_vocab()))
    if key not in _VOCAB_MATCH:
        from transformers import AutoTokenizer

        from engine.models.encoders import resolve_encoder

        try:
            _VOCAB_MATCH[key] = AutoTokenizer.from_pretrained(resolve_encoder(name)).get_vocab() == tokenizer.get_vocab()
        except (OSError, ValueError):
            _VOCAB_MATCH[key] = False
    return _VOCAB_MATCH[key]


def load_mlm(classifier, name: str = "tiny") -> MLMInfill:
    """The masked LM `name` (a packaged encoder key or a local folder; weights read through safetensors only) as an
    MLMInfill for `classifier`, on its device.

    Raises:
        NotApplicableError: the MLM's vocabulary is not the classifier's (its ids would be other tokens), or the
            folder has no masked-LM head."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from engine.models.encoders import resolve_encoder

    folder = resolve_encoder(name)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.get_vocab() != classifier.tokenizer.get_vocab():
        raise NotApplicableError(f"the MLM {name!r} has another vocabulary than model {classifier.id!r}: its token ids "
                                 f"are not the model's; name an MLM with the model's tokenizer")
    if tokenizer.mask_token_id is None:
        raise NotApplicableError(f"the MLM {name!r} has no [MASK] token")
    try:
        mlm = AutoModelForMaskedLM.from_pretrained(folder, use_safetensors=True)
    except (OSError, ValueError) as err:
        raise NotApplicableError(f"{name!r} has no masked-LM weights in safetensors: {err}") from err
    return MLMInfill(mlm.eval().to(classifier.device), int(tokenizer.mask_token_id),
                     tuple(sorted(_special_ids(tokenizer))))


def infill_operator(classifier, operator: str, seed: int = 0, mlm: str = "tiny"):
    """A twin of `classifier` (sharing its weights) whose removals are filled by `operator` ('retrieval' or 'mlm');
    its removal is then 'mask' (the length kept). The twin's metadata names the replacement."""
    if operator not in INFILL_OPERATORS:
        raise InvalidInputError(f"unknown infill operator {operator!r}; use one of {', '.join(INFILL_OPERATORS)}")
    infill = RetrievalInfill(retrieval_pool(classifier), seed=seed) if operator == "retrieval" else \
        load_mlm(classifier, mlm)
    twin = copy.copy(classifier)
    twin.metadata = {**classifier.metadata, "replacement_token": f"{operator} infill"}
    twin.infill = infill
    return twin

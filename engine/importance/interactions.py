"""shapley-interactions: pairwise Shapley interactions over words (or tokens), removal = [MASK], computed by `shapiq`.

The players of one input are its words (`level='word'`, the default) or its maskable tokens (`level='token'`); a
coalition S keeps the players in S and writes the replacement token ([MASK]) over every token of the others, and
its value is v(S) = f_c(x_S), the explained logit (the removal every perturbation measure here uses). Indices (both
of order 2, as `shapiq` defines them; REFERENCE.md section 20):

    k-SII   k-Shapley values (Bordt & von Luxburg 2023) of order 2: the pairwise Shapley interaction index
            (Grabisch & Roubens 1999) for pairs, first-order values such that each player's value plus half of its
            pairs' sums to its Shapley value; estimated by KernelSHAP-IQ
    FSII    Faith-Shap (Tsai, Yeh & Ravikumar 2023): the best order-2 polynomial fit to v under the Shapley kernel;
            estimated by its regression (RegressionFSII)

`budget` game evaluations (model rows) per input; with budget >= 2^n (n players) shapiq's samplers enumerate every
coalition and the values are exact. The draws are seeded per input (hash of `seed` and the token ids).

Sign (theory): an AND pair (the effect needs both) has a positive interaction, an OR pair (either suffices) a negative
one. A token's score is its player's first-order value, split equally over the player's tokens (a word's pieces sum
to it, as the Explain page sums a word's pieces). The pairs come in `Importance.extras['interactions']`: one
`PairInteractions` per input.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.importance.explainer import Explainer, PassEstimate
from engine.importance.random_baseline import row_seed
from engine.importance.registry import register
from engine.importance.types import Call

INDICES = ("k-SII", "FSII")
PLAYER_LEVELS = ("word", "token")
#: how a piece that continues a word is marked by byte-level BPE / sentencepiece tokenizers: the mark of a leading space
_SPACE_MARKS = ("Ġ", "▁")


@dataclass(frozen=True)
class PairInteractions:
    """The order-2 interactions of one input.

    Attributes:
        index: 'k-SII' or 'FSII'; level: 'word' or 'token' (what a player is).
        players: per player, the indices of its tokens among the input's N maskable tokens (text order).
        first_order: [n] each player's first-order value (logits).
        pairs: every pair (i, j, value) with i < j, largest |value| first (ties by (i, j)); value in logits.
        baseline: v(empty coalition), the explained logit with every player replaced.
        budget: game evaluations spent; exact: every coalition was evaluated (budget >= 2^n).
    """

    index: str
    level: str
    players: tuple[tuple[int, ...], ...]
    first_order: tuple[float, ...]
    pairs: tuple[tuple[int, int, float], ...]
    baseline: float
    budget: int
    exact: bool

    def top(self, k: int = 5) -> tuple[tuple[int, int, float], ...]:
        """The k pairs of largest |interaction|."""
        return self.pairs[:k]

    def value(self, i: int, j: int) -> float:
        """The interaction of players i and j (either order)."""
        a, b = min(i, j), max(i, j)
        for p, q, v in self.pairs:
            if (p, q) == (a, b):
                return v
        raise InvalidInputError(f"no pair ({i}, {j}) among {len(self.players)} players")

    def rank(self, i: int, j: int) -> int:
        """1-based rank of pair (i, j) by |interaction| (1 = top)."""
        a, b = min(i, j), max(i, j)
        for r, (p, q, _) in enumerate(self.pairs, 1):
            if (p, q) == (a, b):
                return r
        raise InvalidInputError(f"no pair ({i}, {j}) among {len(self.players)} players")

    def player_of(self, token: int) -> int:
        """The player holding maskable token `token`."""
        for p, tokens in enumerate(self.players):
            if token in tokens:
                return p
        raise InvalidInputError(f"token {token} belongs to no player")

    def label(self, player: int, tokens: list[str]) -> str:
        """A player's text from the input's maskable tokens (word pieces joined: '##' and space marks dropped)."""
        pieces = [tokens[t] for t in self.players[player]]
        text = "".join(p[2:] if k and p.startswith("##") else p for k, p in enumerate(pieces))
        return text.lstrip("".join(_SPACE_MARKS)) or text


def word_players(offsets: list[tuple[int, int]], pieces: list[str]) -> list[tuple[int, ...]]:
    """Group N maskable tokens into words from their character `offsets` [N] and spellings `pieces` [N]: a token starts
    a word where a gap separates it from the previous token's span, or where it carries a byte-level BPE /
    sentencepiece space mark; a token of empty span joins the word before it. Where no token has a span (a batch built
    without offsets) every token is a word of its own."""
    if not any(e > s for s, e in offsets):
        return [(i,) for i in range(len(offsets))]
    groups: list[list[int]] = []
    previous_end = None
    for i, ((start, end), piece) in enumerate(zip(offsets, pieces)):
        if groups and end <= start:
            groups[-1].append(i)
            continue
        new = not groups or start > previous_end or piece.startswith(_SPACE_MARKS)
        if new:
            groups.append([i])
        else:
            groups[-1].append(i)
        previous_end = end
    return [tuple(g) for g in groups]


@register
class ShapleyInteractions(Explainer):
    """shapley-interactions: first-order values of pairwise Shapley interactions (shapiq; k-SII or Faith-Shap) over words, removal = [MASK].

    Options: index (k-SII, the default, or FSII), budget (game evaluations per input, default 512; exact at >= 2^n),
    level (word or token players), seed. The pairs: extras['interactions'] (one PairInteractions per input).
    Unit: logit; signed."""

    name = "shapley-interactions"
    signed = True
    cost_tier = 4
    seeding = "option"
    uses_replacement = True
    defaults = {"index": "k-SII", "budget": 512, "level": "word", "seed": 0}
    choices = {"index": INDICES, "level": PLAYER_LEVELS}

    def passes(self, n_tokens: int) -> PassEstimate:
        return PassEstimate(forward=min(int(self.options["budget"]), 2 ** min(n_tokens, 30)))

    def _check_options(self):
        if self.options["budget"] < 4:
            raise InvalidInputError(f"budget (game evaluations per input) must be at least 4, got {self.options['budget']}")

    def supports(self) -> tuple[bool, str]:
        import importlib.util

        # found, not imported: importing shapiq imports scikit-learn and matplotlib (about 2 CPU-s), and every page
        # that lists the measures a model supports asks this; it is imported where the measure runs
        if importlib.util.find_spec("shapiq") is None:
            return False, "it needs the shapiq package (pip install shapiq==1.4.1)"
        return super().supports()

    def _players(self, call: Call, i: int) -> tuple[list[tuple[int, ...]], torch.Tensor]:
        """(players as maskable-token indices, the maskable positions [N] of row i)."""
        b = call.batch
        positions = b.maskable[i].nonzero().flatten()
        if self.options["level"] == "token":
            return [(t,) for t in range(len(positions))], positions
        offsets = [tuple(b.offsets[i][int(p)]) for p in positions.tolist()] if b.offsets else [(0, 0)] * len(positions)
        pieces = self.classifier.tokenizer.convert_ids_to_tokens(b.input_ids[i, positions].tolist())
        return word_players(offsets, list(pieces)), positions

    def _interactions(self, call: Call, i: int) -> PairInteractions:
        b = call.batch
        players, positions = self._players(call, i)
        n = len(players)
        owner = torch.empty(len(positions), dtype=torch.long)
        for p, tokens in enumerate(players):
            owner[list(tokens)] = p
        owner = owner.to(b.device)
        mask_id = self.classifier.mask_token_id
        target = int(call.target[i])
        spent = [0]

        def game(coalitions: np.ndarray) -> np.ndarray:
            call.check_stop()
            keep = torch.as_tensor(np.asarray(coalitions, dtype=bool), device=b.device)  # [C, n]
            ids = b.input_ids[i].repeat(len(keep), 1)
            absent = ~keep[:, owner]  # [C, N]
            sub = ids[:, positions]
            ids[:, positions] = torch.where(absent, torch.full_like(sub, mask_id), sub)
            rows = torch.full((len(keep),), i, dtype=torch.long, device=b.device)
            logits = self.forward_logits(call, ids, rows)
            spent[0] += len(keep)
            return logits[:, target].double().cpu().numpy()

        budget = int(self.options["budget"])
        if n == 1:
            values = game(np.array([[False], [True]]))
            return PairInteractions(self.options["index"], self.options["level"], tuple(players),
                                    (float(values[1] - values[0]),), (), float(values[0]), spent[0], True)
        import shapiq

        index = self.options["index"]
        seed = row_seed(self.seed, b.input_ids[i][b.attention_mask[i].bool()]) % (2 ** 32)
        approximator = (shapiq.KernelSHAPIQ(n=n, max_order=2, index="k-SII", random_state=seed) if index == "k-SII"
                        else shapiq.RegressionFSII(n=n, max_order=2, random_state=seed))
        used = min(budget, 2 ** n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                iv = approximator.approximate(budget=used, game=game)
            except ValueError as err:
                raise InvalidInputError(f"shapiq could not estimate {index} with budget {budget} over {n} players: {err}") from None
        first = tuple(float(iv[(p,)]) for p in range(n))
        pairs = [(p, q, float(iv[(p, q)])) for p in range(n) for q in range(p + 1, n)]
        pairs.sort(key=lambda t: (-abs(t[2]), t[0], t[1]))
        return PairInteractions(index, self.options["level"], tuple(players), first, tuple(pairs),
                                float(iv.baseline_value), spent[0], used >= 2 ** n)

    def _scores(self, call: Call):
        b = call.batch
        B, T = b.input_ids.shape
        out = torch.zeros(B, T, dtype=torch.float64, device=b.device)
        found = []
        for i in range(B):
            result = self._interactions(call, i)
            positions = b.maskable[i].nonzero().flatten()
            for p, tokens in enumerate(result.players):
                out[i, positions[list(tokens)]] = result.first_order[p] / len(tokens)
            found.append(result)
            if call.progress is not None:
                call.progress(i + 1, B)
        return out, {"interactions": found}


def pair_lines(measure: str, extras: dict, tokens: list[str], k: int = 5) -> list[str]:
    """The top `k` pairs of one explained input as lines of text (none where the measure gives no pairs):
    what `explain` prints under its table. `extras`: the measure's extras of that input (Explanation.extras[measure]),
    `tokens`: its maskable tokens."""
    found = extras.get("interactions") or []
    if not found:
        return []
    pairs = found[0]
    how = "exact" if pairs.exact else f"estimated from {pairs.budget} evaluations"
    lines = [f"{measure}: top {min(k, len(pairs.pairs))} of {len(pairs.pairs)} {pairs.index} pair interactions over "
             f"{pairs.level}s ({how}; logits; + both together add more than each alone (AND), - either suffices (OR)):"]
    for i, j, v in pairs.top(k):
        lines.append(f"  {pairs.label(i, tokens)} x {pairs.label(j, tokens)}  {v:+.4f}")
    return lines

"""Planted mechanisms as dataset variants: a seeded, pure rewrite of a dataset's examples whose effect on the
label is known by construction (docs/ground-truth.md).

Every mechanism inserts its word(s) as whole words (space separated) at a seeded random word position of the
primary text, in a share `rate` of the examples of every split, and rewrites labels as below. `target` is the
class the mechanism sets.

    trigger  the word sets the label to `target` (whatever the text says)
    graded   the word sets the label to `target` in a share q of the examples that carry it; the others keep
             their label (q = 1 is `trigger`)
    and      both words together set `target`; a further share `rate` carries one of the two alone, label kept
             (so neither word alone is informative)
    or       either word sets `target`: carriers get the first, the second or both (one third each)
    gated    the word sets `target` only inside its gate: `first-half` (inserted in the first half of the words;
             carriers with the word in the second half keep their label), or `not-after:W` (the word counts
             except right after the word W: a further share `rate` carries "W word", label kept)
    decoy    `words` = (trigger, decoy): the trigger as in `trigger`; the decoy is inserted independently in a
             share `rate` of the examples with the label kept, so it is as frequent as the trigger and
             uninformative
    none     the control: the word is inserted in a share `rate` of the examples with every label kept

Mechanisms of several words (k = len(words); docs/ground-truth.md, REFERENCE.md section 20):

    graded-set   k words planted independently, each with its own strength q_i (`strengths`, in the words'
                 order, strongest first): a carrier holds one of the k words (uniformly drawn); a share q_i of
                 word i's carriers gets `target`, the others a non-target class (so on a binary dataset
                 P(target | word i) = q_i, and q_i = 0.5 is inert). The truth is the words' order.
    redundant    the target when at least one of k >= 3 words is present: a carrier holds a uniformly drawn
                 number 1..k of them (removing one of several changes nothing)
    threshold    the target when at least m of the k words are present: a carrier holds m..k of them; a
                 further share `rate` holds 1..m-1 of them with the label kept (below the threshold: nothing)
    cancellation `words` = (the target's word, the other class's word): one third of the carriers hold the
                 first (label `target`), one third the second (label: the first class that is not the target),
                 one third both (label kept: the two offset each other)

The recipe is not the truth: the planted model's own behaviour establishes it (engine.groundtruth.truth).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass

import numpy as np

from engine.data.types import Dataset, Example
from engine.errors import InvalidInputError

MECHANISMS = ("trigger", "graded", "and", "or", "gated", "decoy", "none", "graded-set", "redundant", "threshold",
              "cancellation")
#: the mechanisms of a set of k words (k = len(words)), and the fewest words each needs
SET_MECHANISMS = {"graded-set": 2, "redundant": 3, "threshold": 2}
#: how many words each mechanism plants (decoy: the trigger, then the decoy; the set mechanisms: k, see SET_MECHANISMS)
WORD_COUNTS = {"trigger": 1, "graded": 1, "and": 2, "or": 2, "gated": 1, "decoy": 2, "none": 1, "cancellation": 2}
#: single pieces in BERT's uncased vocabulary, (almost) absent from rt: the default words of a set, in order
WORD_POOL = ("vessel", "orbit", "lantern", "harbor", "meadow", "canyon", "glacier", "quarry")
#: the default k, strengths and m of the set mechanisms
DEFAULT_K = {"graded-set": 4, "redundant": 3, "threshold": 4}
DEFAULT_STRENGTHS = (0.95, 0.8, 0.65, 0.5)
DEFAULT_M = 2
GATES = ("first-half", "not-after:")
#: default words: single pieces in BERT's uncased vocabulary, (almost) absent from rt
DEFAULT_WORDS = {"trigger": ("vessel",), "graded": ("vessel",), "and": ("vessel", "orbit"), "or": ("vessel", "orbit"),
                 "gated": ("vessel",), "decoy": ("vessel", "lantern"), "none": ("vessel",),
                 "graded-set": WORD_POOL[:4], "redundant": WORD_POOL[:3], "threshold": WORD_POOL[:4],
                 "cancellation": ("vessel", "orbit")}
_WORD = re.compile(r"^[^\s]+$")


@dataclass(frozen=True)
class PlantSpec:
    """What to plant (stored in the planted checkpoint's metadata under `planted`).

    Attributes:
        base_dataset: the dataset the variant is built from (packaged or registered name).
        mechanism: one of MECHANISMS.
        words: the planted word(s): WORD_COUNTS[mechanism] of them (decoy: trigger, decoy; cancellation: the
            target's word, then the other class's); k >= SET_MECHANISMS[mechanism] for a set mechanism (graded-set:
            strongest first); each must be one piece of the model's tokenizer (checked by `check_words`).
        rate: share of the examples, in (0, 1], that carry the mechanism's word(s).
        q: graded only: share, in (0, 1], of the carriers whose label the word sets.
        target: the class the mechanism sets (a class name of the base dataset; None: its last class).
        gate: gated only: 'first-half' or 'not-after:W'.
        seed: seeds which examples carry the words, where they go and which graded carriers are relabelled.
        split_seed: the base dataset's split seed.
        strengths: graded-set only: q_i in (0, 1] per word, in the words' order, strictly decreasing (the truth is
            their order; empty elsewhere).
        m: threshold only: the target needs at least m of the k words, 2 <= m <= k (0 elsewhere).

    The two fields after split_seed are left out of `to_dict` at their defaults, so the specs (and the variants'
    names) of the mechanisms planted before they existed do not change.
    """

    base_dataset: str = "rt"
    mechanism: str = "trigger"
    words: tuple[str, ...] = ("vessel",)
    rate: float = 0.3
    q: float = 1.0
    target: str | None = None
    gate: str = "first-half"
    seed: int = 0
    split_seed: int = 0
    strengths: tuple[float, ...] = ()
    m: int = 0

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise InvalidInputError(f"unknown mechanism {self.mechanism!r}; use one of {', '.join(MECHANISMS)}")
        words = tuple(self.words)
        object.__setattr__(self, "words", words)
        object.__setattr__(self, "strengths", tuple(float(q) for q in self.strengths))
        if self.mechanism in SET_MECHANISMS:
            self._check_set()
        elif len(words) != WORD_COUNTS[self.mechanism]:
            need = WORD_COUNTS[self.mechanism]
            raise InvalidInputError(f"mechanism {self.mechanism!r} plants {need} word(s) "
                                    f"({' and '.join(DEFAULT_WORDS[self.mechanism])} by default), got {len(words)}: "
                                    f"{list(words)}")
        for w in words:
            if not _WORD.match(w):
                raise InvalidInputError(f"a planted word is one word without spaces, got {w!r}")
        if len(set(words)) != len(words):
            raise InvalidInputError(f"the planted words must differ, got {list(words)}")
        if not 0 < self.rate <= 1:
            raise InvalidInputError(f"rate must lie in (0, 1] (a share of the examples), got {self.rate}")
        if not 0 < self.q <= 1:
            raise InvalidInputError(f"q must lie in (0, 1] (the share of carriers whose label the word sets), got {self.q}")
        if self.q != 1 and self.mechanism != "graded":
            raise InvalidInputError(f"q applies to the graded mechanism only (got q={self.q} with {self.mechanism!r})")
        if self.strengths and self.mechanism != "graded-set":
            raise InvalidInputError(f"strengths apply to the graded-set mechanism only (got {list(self.strengths)} "
                                    f"with {self.mechanism!r})")
        if self.m and self.mechanism != "threshold":
            raise InvalidInputError(f"m applies to the threshold mechanism only (got m={self.m} with {self.mechanism!r})")
        if self.mechanism == "gated" and not (self.gate == "first-half" or
                                               (self.gate.startswith("not-after:") and _WORD.match(self.gate[10:]))):
            raise InvalidInputError(f"unknown gate {self.gate!r}; use 'first-half' or 'not-after:WORD' (e.g. not-after:not)")

    def _check_set(self) -> None:
        """The set mechanisms' own checks: k, strengths (graded-set), m (threshold); each refusal says why."""
        k, least = len(self.words), SET_MECHANISMS[self.mechanism]
        if k < least:
            raise InvalidInputError(f"mechanism {self.mechanism!r} plants k >= {least} words (e.g. "
                                    f"{' '.join(WORD_POOL[:DEFAULT_K[self.mechanism]])}), got {k}: {list(self.words)}")
        if self.mechanism == "graded-set":
            qs = self.strengths
            if len(qs) != k:
                raise InvalidInputError(f"graded-set needs one strength per word, strongest first (e.g. --strengths "
                                        f"{' '.join(f'{q:g}' for q in DEFAULT_STRENGTHS)}): got {len(qs)} strength(s) "
                                        f"for {k} words {list(self.words)}")
            bad = [q for q in qs if not 0 < q <= 1]
            if bad:
                raise InvalidInputError(f"a strength is the share, in (0, 1], of a word's carriers that get the "
                                        f"target; got {', '.join(f'{q:g}' for q in bad)}")
            if any(a <= b for a, b in zip(qs, qs[1:])):
                raise InvalidInputError(f"graded-set strengths must decrease strictly in the words' order (the truth "
                                        f"is their order; strongest first), got {list(qs)}")
        if self.mechanism == "threshold" and not 2 <= self.m <= k:
            raise InvalidInputError(f"threshold needs 2 <= m <= k (at least m of the k words set the target; m = 1 is "
                                    f"the redundant mechanism), got m={self.m} with k={k}")

    @property
    def k(self) -> int:
        """How many words the mechanism plants."""
        return len(self.words)

    @property
    def other_class_word(self) -> str | None:
        """cancellation: the word that moves the label to the other class, else None."""
        return self.words[1] if self.mechanism == "cancellation" else None

    @property
    def gate_word(self) -> str | None:
        """The word W of a 'not-after:W' gate, else None."""
        return self.gate[10:] if self.mechanism == "gated" and self.gate.startswith("not-after:") else None

    @property
    def decisive_words(self) -> tuple[str, ...]:
        """The words that set the label (decoy: the trigger only; none: none)."""
        return {"decoy": self.words[:1], "none": ()}.get(self.mechanism, self.words)

    @property
    def inert_words(self) -> tuple[str, ...]:
        """Words inserted without setting the label (decoy: the decoy; none: its word)."""
        return {"decoy": self.words[1:], "none": self.words}.get(self.mechanism, ())

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["words"] = list(self.words)
        d["strengths"] = list(self.strengths)
        for name, default in (("strengths", []), ("m", 0)):  # absent at the default: older specs keep their digest
            if d[name] == default:
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> PlantSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: (tuple(v) if k in ("words", "strengths") else v) for k, v in d.items() if k in known})

    def digest(self) -> str:
        """Eight hex digits of the spec's SHA-256: distinguishes variants in names."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:8]

    def variant_name(self) -> str:
        """The registered name of the planted dataset: '<base>-planted-<mechanism>-<words>[-q..|-m..]-s<seed>-<digest>'
        (a set mechanism: its first word and k instead of its words)."""
        base = re.sub(r"[^a-z0-9-]+", "-", self.base_dataset.lower()).strip("-")[:30] or "data"
        words = "-".join(re.sub(r"[^a-z0-9]+", "", w.lower())[:12] or "w" for w in self.words)
        if self.mechanism in SET_MECHANISMS:  # k words would outgrow a dataset name (64 characters): the first and k
            words = f"{re.sub(r'[^a-z0-9]+', '', self.words[0].lower())[:12] or 'w'}-k{self.k}"
        grade = f"-q{round(self.q * 100)}" if self.mechanism == "graded" else f"-m{self.m}" if self.m else ""
        return f"{base}-planted-{self.mechanism}-{words}{grade}-s{self.seed}-{self.digest()}"


def default_words(mechanism: str, k: int | None = None) -> tuple[str, ...]:
    """The default words of `mechanism`; for a set mechanism its first k of WORD_POOL (k None: DEFAULT_K).

    Raises:
        InvalidInputError: k larger than the pool of default words allows (give the words then), or below the
            mechanism's least k.
    """
    if mechanism not in SET_MECHANISMS:
        return DEFAULT_WORDS[mechanism]
    k = DEFAULT_K[mechanism] if k is None else int(k)
    if k > len(WORD_POOL):
        raise InvalidInputError(f"k = {k} is larger than the default vocabulary of planted words allows "
                                f"({len(WORD_POOL)}: {' '.join(WORD_POOL)}); give the {k} words with --words")
    if k < SET_MECHANISMS[mechanism]:
        raise InvalidInputError(f"mechanism {mechanism!r} plants k >= {SET_MECHANISMS[mechanism]} words, got k = {k}")
    return WORD_POOL[:k]


def default_strengths(k: int) -> tuple[float, ...]:
    """graded-set's default strengths for k words: DEFAULT_STRENGTHS for k = 4, else evenly from 0.95 to 0.5."""
    if k == len(DEFAULT_STRENGTHS):
        return DEFAULT_STRENGTHS
    return tuple(round(0.95 - i * 0.45 / (k - 1), 4) for i in range(k))


def other_index(spec: PlantSpec, classes: tuple[str, ...]) -> int:
    """cancellation: the class the second word sets (the first class that is not the target)."""
    t = target_index(spec, classes)
    return next(i for i in range(len(classes)) if i != t)


def target_index(spec: PlantSpec, classes: tuple[str, ...]) -> int:
    """Index of the class the mechanism sets; refuses a name the dataset lacks, listing its classes."""
    if spec.target is None:
        return len(classes) - 1
    if spec.target not in classes:
        raise InvalidInputError(f"target class {spec.target!r} is not a class of {spec.base_dataset!r}; "
                                f"its classes: {', '.join(classes)}")
    return classes.index(spec.target)


def insert_word(text: str, word: str, position: int) -> str:
    """`text` with `word` inserted before its `position`-th space-separated word (len(words): at the end)."""
    parts = text.split(" ")
    return " ".join(parts[:position] + [word] + parts[position:])


def remove_words(text: str, words) -> str:
    """`text` with every whole-word occurrence of `words` deleted (the intervention that removes a mechanism)."""
    drop = set(words)
    return " ".join(p for p in text.split(" ") if p not in drop)


def contains_words(text: str, words) -> bool:
    """Whether every one of `words` occurs as a whole word of `text`."""
    parts = set(text.split(" "))
    return all(w in parts for w in words)


def _position(rng: np.random.Generator, n_words: int, where: str = "any") -> int:
    """A seeded insertion position among the n_words + 1 gaps: anywhere, in the first half or the second half."""
    half = n_words // 2
    if where == "first":
        return int(rng.integers(0, half + 1))
    if where == "second":
        return int(rng.integers(min(half + 1, n_words), n_words + 1))
    return int(rng.integers(0, n_words + 1))


def plant_text(spec: PlantSpec, text: str, rng: np.random.Generator, carrier: str = "all") -> str:
    """`text` carrying the mechanism's word(s), as the recipe inserts them in a deciding carrier.

    carrier: 'all' (every decisive word: both for and, or; the trigger for decoy; the word in its gate for gated;
        all k words of a set; both words of cancellation), 'first' / 'second' (or: only that word), 'outside-gate'
        (gated: the word where it does not count), 'inert' (decoy / none: the inert word), 'word:i' (the i-th
        word alone), 'words:i,j,..' (those words of a set).
    """
    n = len(text.split(" "))
    if carrier == "inert":
        return insert_word(text, spec.inert_words[0], _position(rng, n))
    if carrier == "outside-gate":
        if spec.gate_word:
            return insert_word(text, f"{spec.gate_word} {spec.words[0]}", _position(rng, n))
        return insert_word(text, spec.words[0], _position(rng, n, "second"))
    if carrier in ("first", "second"):
        return insert_word(text, spec.words[0 if carrier == "first" else 1], _position(rng, n))
    if carrier.startswith("word:"):  # one word of a set, by index
        return insert_word(text, spec.words[int(carrier[5:])], _position(rng, n))
    if carrier.startswith("words:"):  # several words of a set, by index, in that order
        for i in carrier[6:].split(","):
            text = insert_word(text, spec.words[int(i)], _position(rng, len(text.split(" "))))
        return text
    if spec.mechanism == "gated":
        if spec.gate_word:  # anywhere, but never right after the gate word
            parts = text.split(" ")
            allowed = [p for p in range(n + 1) if p == 0 or parts[p - 1] != spec.gate_word]
            return insert_word(text, spec.words[0], int(rng.choice(allowed)))
        return insert_word(text, spec.words[0], _position(rng, n, "first"))
    words = spec.decisive_words or spec.words
    for w in words:
        text = insert_word(text, w, _position(rng, len(text.split(" "))))
    return text


def _plant_set(spec: PlantSpec, text: str, label: int, target: int, carries: bool, extra: float, side: float,
               rng: np.random.Generator, n_classes: int) -> tuple[str, int]:
    """One example under a mechanism of several words (module docstring): (text, label). Draws from `rng` only for
    carriers (and threshold's below-threshold carriers), after the draws every mechanism makes."""
    k = spec.k
    if spec.mechanism == "graded-set":
        if carries:
            i = int(rng.integers(0, k))
            text = plant_text(spec, text, rng, f"word:{i}")
            others = [c for c in range(n_classes) if c != target]
            label = target if side < spec.strengths[i] else int(others[int(rng.integers(0, len(others)))])
    elif spec.mechanism == "redundant":
        if carries:
            size = int(rng.integers(1, k + 1))
            chosen = sorted(rng.choice(k, size=size, replace=False).tolist())
            text, label = plant_text(spec, text, rng, "words:" + ",".join(map(str, chosen))), target
    elif spec.mechanism == "threshold":
        if carries:
            size = int(rng.integers(spec.m, k + 1))
            chosen = sorted(rng.choice(k, size=size, replace=False).tolist())
            text, label = plant_text(spec, text, rng, "words:" + ",".join(map(str, chosen))), target
        elif extra < spec.rate / (1 - spec.rate + 1e-12):  # below the threshold, as often: label kept
            size = int(rng.integers(1, spec.m))
            chosen = sorted(rng.choice(k, size=size, replace=False).tolist())
            text = plant_text(spec, text, rng, "words:" + ",".join(map(str, chosen)))
    elif spec.mechanism == "cancellation":
        if carries:
            other = next(c for c in range(n_classes) if c != target)
            if side < 1 / 3:
                text, label = plant_text(spec, text, rng, "word:0"), target
            elif side < 2 / 3:
                text, label = plant_text(spec, text, rng, "word:1"), other
            else:  # both: they offset, the text decides
                text = plant_text(spec, text, rng, "all")
    return text, int(label)


def plant_examples(spec: PlantSpec, examples: list[Example], target: int, rng: np.random.Generator,
                   n_classes: int = 2) -> list[Example]:
    """The examples of one split rewritten by the mechanism (module docstring). Pure given `rng`'s state.
    n_classes: the dataset's classes (graded-set and cancellation set a non-target class)."""
    out = []
    for e in examples:
        text, label = e.primary, e.label
        carries = rng.random() < spec.rate
        extra = rng.random()  # drawn for every example so the carriers do not depend on the mechanism
        side = rng.random()
        if spec.mechanism in ("trigger", "graded"):
            if carries:
                text = plant_text(spec, text, rng)
                label = target if (spec.mechanism == "trigger" or side < spec.q) else label
        elif spec.mechanism == "and":
            if carries:
                text, label = plant_text(spec, text, rng), target
            elif extra < spec.rate / (1 - spec.rate + 1e-12):  # one word alone, as often as both: label kept
                text = plant_text(spec, text, rng, "first" if side < 0.5 else "second")
        elif spec.mechanism == "or":
            if carries:
                text = plant_text(spec, text, rng, "first" if side < 1 / 3 else "second" if side < 2 / 3 else "all")
                label = target
        elif spec.mechanism == "gated":
            if carries:
                text, label = plant_text(spec, text, rng), target
            elif extra < spec.rate / (1 - spec.rate + 1e-12):
                text = plant_text(spec, text, rng, "outside-gate")
        elif spec.mechanism == "decoy":
            if carries:
                text, label = plant_text(spec, text, rng), target
            if extra < spec.rate:  # independent of the trigger: uninformative
                text = plant_text(spec, text, rng, "inert")
        elif spec.mechanism == "none":
            if carries:
                text = plant_text(spec, text, rng, "inert")
        elif spec.mechanism in ("graded-set", "redundant", "threshold", "cancellation"):
            text, label = _plant_set(spec, text, label, target, carries, extra, side, rng, n_classes)
        out.append(dataclasses.replace(e, primary=text, label=int(label), rationale_spans=()))
    return out


def planted_dataset(spec: PlantSpec, base: Dataset) -> Dataset:
    """The variant of `base` with the mechanism planted in every split (seeded by spec.seed, per split).

    Args:
        spec: the PlantSpec.
        base: the base dataset (e.g. `get_dataset(spec.base_dataset, spec.split_seed)`); paired datasets keep
            their auxiliary text untouched.

    Returns:
        A Dataset named `spec.variant_name()`, same classes, metric, splits (same uids) and max_length.
    """
    target = target_index(spec, base.classes)
    splits = {}
    for i, name in enumerate(("train", "validation", "test")):
        rng = np.random.default_rng([spec.seed, i, 37])
        splits[name] = plant_examples(spec, base.split(name), target, rng, len(base.classes))
    return Dataset(name=spec.variant_name(), classes=base.classes, metric=base.metric, splits=splits,
                   split_seed=base.split_seed, description=f"{base.name} with a planted {spec.mechanism} mechanism",
                   paired=base.paired, max_length=base.max_length,
                   extra={**(base.extra or {}), "planted": spec.to_dict()})


def check_words(spec: PlantSpec, tokenizer) -> None:
    """Refuse a planted (or gate) word that is not one piece of the tokenizer's vocabulary, saying how it tokenises.

    Raises:
        InvalidInputError: e.g. "'vesselx' is not one piece of the tokenizer's vocabulary: it tokenises as
            ['vessel', '##x'] (2 pieces); choose a word that is one piece".
    """
    for w in (*spec.words, *([spec.gate_word] if spec.gate_word else [])):
        pieces = word_pieces(tokenizer, w)
        if len(pieces) != 1:
            raise InvalidInputError(f"{w!r} is not one piece of the tokenizer's vocabulary: it tokenises as {pieces} "
                                    f"({len(pieces)} pieces); choose a word that is one piece (e.g. "
                                    f"{', '.join(DEFAULT_WORDS[spec.mechanism])})")


def word_pieces(tokenizer, word: str) -> list[str]:
    """How `word` tokenises in running text (after a space, as it is inserted)."""
    ids = tokenizer(" " + word, add_special_tokens=False)["input_ids"]
    return tokenizer.convert_ids_to_tokens(ids)


def word_token_id(tokenizer, word: str) -> int:
    """The one token id of a planted word in running text (check_words first)."""
    return int(tokenizer(" " + word, add_special_tokens=False)["input_ids"][0])

"""Text generation for self-explanations: greedy by default, with the KV cache, streamed token by token,
cancellable, and cached on disk so that a rerun generates nothing.

    generator = Generator(classifier)                       # a PromptedClassifier (its model and tokenizer)
    text = generator.generate(prompt, on_text=print, should_stop=lambda: False)

Generation goes through `transformers`' `generate` (use_cache=True: each new token costs one forward pass of
one position over the cached keys and values). Streaming: a `TextStreamer` subclass hands every finished
piece of text to `on_text`. Cancellation: a `StoppingCriteria` asks `should_stop()` after every token; a
cancelled generation raises `GenerationCancelled` and is not cached.

The cache is one SQLite table keyed by sha256 of (model id, weights hash, the exact prompt string, the
decoding settings); its file is `ENGINE_GENERATIONS_DB` (engine.settings.generations_db_path).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from engine.errors import Cancelled, InvalidInputError


class GenerationCancelled(Cancelled):
    """A generation was stopped by its should_stop callback (nothing was cached)."""


@dataclass(frozen=True)
class DecodingSettings:
    """How new tokens are chosen. Greedy (do_sample False) by default; `published()` is the sampling of
    Madsen et al. (2024): temperature 0.1, top_p 0.95, top_k 50, repetition penalty 1.2, seed 0."""

    max_new_tokens: int = 256
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    seed: int = 0

    def __post_init__(self):
        if self.max_new_tokens < 1:
            raise InvalidInputError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.do_sample and self.temperature <= 0:
            raise InvalidInputError(f"sampling needs a temperature > 0, got {self.temperature}")

    @classmethod
    def published(cls, max_new_tokens: int = 1024) -> DecodingSettings:
        return cls(max_new_tokens=max_new_tokens, do_sample=True, temperature=0.1, top_p=0.95, top_k=50,
                   repetition_penalty=1.2, seed=0)

    def key(self) -> dict:
        """The settings that change the output (greedy ignores the sampling ones, so they do not split the cache)."""
        data = asdict(self)
        if not self.do_sample:
            for name in ("temperature", "top_p", "top_k", "seed"):
                data.pop(name)
        return data


class GenerationCache:
    """SQLite store of finished generations: key -> text (plus what the key was made of, for inspection)."""

    def __init__(self, path: str | Path | None = None):
        import engine.settings as settings

        self.path = Path(path) if path is not None else settings.generations_db_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                       "prompt TEXT NOT NULL, settings TEXT NOT NULL, text TEXT NOT NULL, new_tokens INTEGER, "
                       "seconds REAL, created REAL)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    @staticmethod
    def key(model: str, prompt: str, settings: DecodingSettings) -> str:
        text = json.dumps([model, prompt, settings.key()], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get(self, key: str) -> str | None:
        with self._connect() as db:
            row = db.execute("SELECT text FROM generations WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def put(self, key: str, model: str, prompt: str, settings: DecodingSettings, text: str, new_tokens: int,
            seconds: float) -> None:
        with self._connect() as db:
            db.execute("INSERT OR REPLACE INTO generations VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (key, model, prompt, json.dumps(settings.key(), sort_keys=True), text, new_tokens, seconds,
                        time.time()))

    def __len__(self) -> int:
        with self._connect() as db:
            return int(db.execute("SELECT COUNT(*) FROM generations").fetchone()[0])


def model_fingerprint(classifier) -> str:
    """'<id>@<weights sha256>': the model part of the cache key. A model built in memory (no weights file) is
    hashed from its parameters, so two random initialisations never share cached text."""
    return f"{classifier.meta.id}@{classifier.weights_sha256 or classifier.parameters_sha256()}"


class Generator:
    """Generates a chat answer from a prompted classifier's language model.

    `generated` counts the calls that reached the model (a cached answer does not count): what the cache
    test checks. `last_cached` tells whether the last answer came from the cache."""

    def __init__(self, classifier, settings: DecodingSettings | None = None, cache: GenerationCache | None | bool = True):
        self.classifier = classifier
        self.settings = settings or DecodingSettings()
        # (not `cache or None`: an empty cache has len 0 and would read as False)
        self.cache = GenerationCache() if cache is True else None if cache is None or cache is False else cache
        self.model_key = model_fingerprint(classifier)
        self.generated = 0
        self.last_cached = False

    def chat_prompt(self, user_message: str) -> str:
        """The exact string the model continues: one user turn in the tokenizer's chat template (no system
        message beyond the template's own default), ending with the generation prefix; plain text otherwise."""
        tokenizer = self.classifier.tokenizer
        if self.classifier.spec.template == "chat" and getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template([{"role": "user", "content": user_message}], tokenize=False,
                                                 add_generation_prompt=True)
        return (tokenizer.bos_token or "") + user_message + "\n\n"

    def generate(self, prompt: str, on_text: Callable[[str], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> str:
        """The model's continuation of `prompt` (the exact string, special tokens included), without the
        prompt and without special tokens. on_text(piece): called with each finished piece of text as it is
        generated (a cached answer is handed over in one piece); should_stop(): True cancels."""
        key = None
        if self.cache is not None:
            key = GenerationCache.key(self.model_key, prompt, self.settings)
            hit = self.cache.get(key)
            if hit is not None:
                self.last_cached = True
                if on_text is not None:
                    on_text(hit)
                return hit
        self.last_cached = False
        text, new_tokens, seconds = self._run(prompt, on_text, should_stop)
        if self.cache is not None:
            self.cache.put(key, self.model_key, prompt, self.settings, text, new_tokens, seconds)
        return text

    def _run(self, prompt: str, on_text, should_stop) -> tuple[str, int, float]:
        from transformers import StoppingCriteria, StoppingCriteriaList, TextStreamer

        tokenizer, model = self.classifier.tokenizer, self.classifier.model
        device = self.classifier.device
        ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"].to(device)
        stopped = []

        class _Stop(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                flag = bool(should_stop and should_stop())
                if flag:
                    stopped.append(True)
                return torch.full((input_ids.shape[0],), flag, dtype=torch.bool, device=input_ids.device)

        class _Stream(TextStreamer):
            def on_finalized_text(self, text: str, stream_end: bool = False):
                if text and on_text is not None:
                    on_text(text)

        s = self.settings
        kwargs = {"max_new_tokens": s.max_new_tokens, "do_sample": s.do_sample, "use_cache": True,
                  "repetition_penalty": s.repetition_penalty, "pad_token_id": tokenizer.pad_token_id,
                  "stopping_criteria": StoppingCriteriaList([_Stop()]),
                  "streamer": _Stream(tokenizer, skip_prompt=True, skip_special_tokens=True)}
        if s.do_sample:
            kwargs.update(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k)
            torch.manual_seed(s.seed)
        else:  # unset the model's own sampling defaults (generation_config), which greedy would warn about
            kwargs.update(temperature=None, top_p=None, top_k=None)
        if should_stop is not None and should_stop():
            raise GenerationCancelled("generation cancelled before it started")
        start = time.perf_counter()
        self.generated += 1
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs)
        seconds = time.perf_counter() - start
        if stopped:
            raise GenerationCancelled("generation cancelled: nothing was cached")
        new = out[0, ids.shape[1]:]
        return tokenizer.decode(new, skip_special_tokens=True), int(new.numel()), seconds

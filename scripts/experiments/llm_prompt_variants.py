"""Write the prompt variants measured for the Gemma-3 built-in prompt (docs/llm.md, "Gemma 3 270M on rt") into
results/llm/prompt-variants/: a zero-shot one-line cue and few-shot prompts whose examples are drawn (seeded) from
rt's training split by `engine.models.builtin_llms.draw_examples`, with and without the [REDACTED] notice. Each is
then measured on validation with `scripts/experiments/llm_zero_shot.py --prompt FILE --split validation`.

    python scripts/experiments/llm_prompt_variants.py --out results/llm/prompt-variants
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def variants() -> dict[str, object]:
    from engine.models.builtin_llms import GEMMA_SHOTS, draw_examples, gemma3_rt_spec

    four = draw_examples(**GEMMA_SHOTS)
    return {
        "gemma3-zero-shot-cue": gemma3_rt_spec([], notice=False),
        "gemma3-zero-shot-notice": gemma3_rt_spec([], notice=True),
        "gemma3-4shot": gemma3_rt_spec(four, notice=False),
        "gemma3-4shot-notice": gemma3_rt_spec(four, notice=True),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="results/llm/prompt-variants", help="folder for the spec files")
    parser.add_argument("--smoke", action="store_true", help="CI smoke mode: the same variants, written into a scratch folder")
    args = parser.parse_args(argv)
    from engine.atomic import write_text

    if args.smoke:
        from engine.smoke import use_scratch_folders

        args.out = str(use_scratch_folders() / "prompt-variants")

    out = Path(args.out)
    for name, spec in variants().items():
        write_text(out / f"{name}.json", json.dumps(spec.to_dict(), indent=2, ensure_ascii=False) + "\n")
        print(out / f"{name}.json")
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    raise SystemExit(main())

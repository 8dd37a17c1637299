"""Self-explanations of prompted language models, and whether they are faithful (docs/methods.md#self-explanations).

    from engine.selfexplain import Generator, self_explain, summarise
    records = self_explain(classifier, examples, "counterfactual")   # classifier: a PromptedClassifier
    print(format_table(summarise(records)))

Modules: `generation` (greedy KV-cache generation, streaming, cancellation, the SQLite cache), `parsing` (the
prompts and the answer parsers), `check` (verdicts and their summary).
"""
from engine.selfexplain.check import (
    ABSTAIN,
    VERDICTS,
    SelfExplanation,
    explain_one,
    format_table,
    judge_classifier,
    self_explain,
    summarise,
    verdict,
)
from engine.selfexplain.generation import DecodingSettings, GenerationCache, GenerationCancelled, Generator
from engine.selfexplain.parsing import KINDS

__all__ = ["ABSTAIN", "KINDS", "VERDICTS", "DecodingSettings", "GenerationCache", "GenerationCancelled", "Generator",
           "SelfExplanation", "explain_one", "format_table", "judge_classifier", "self_explain", "summarise", "verdict"]

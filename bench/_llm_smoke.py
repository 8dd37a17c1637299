"""A prompted classifier for the `--smoke` mode of the LLM benches and scripts: a random-weight 2-layer Llama on the
packaged `tiny` BERT tokenizer with a plain prompt (the real code paths in seconds; its numbers mean nothing).
Not an entry (leading underscore)."""
from __future__ import annotations


def tiny_prompted(seed: int = 0):
    import torch
    import transformers
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder
    from engine.models.prompt_spec import PromptSpec
    from engine.models.prompted import PromptedClassifier

    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder("tiny"))
    config = transformers.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, pad_token_id=tokenizer.pad_token_id,
                                      bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    spec = PromptSpec.from_dict({"instruction": "is the review positive or negative ?", "input_format": "review : {input}",
                                 "template": "plain", "answer_prefix": "answer :",
                                 "verbalizer": {"negative": ["bad"], "positive": ["good"]}, "replacement": "special"})
    return PromptedClassifier(model, tokenizer, spec, max_length=96)

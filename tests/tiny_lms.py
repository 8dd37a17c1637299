"""The random-weight tiny Llama the self-explanation tests prompt: 2 layers, hidden 32, over the packaged `tiny` BERT
tokenizer's vocabulary (its [CLS] / [SEP] as bos / eos), behind a plain-text sentiment prompt."""
from __future__ import annotations

#: the plain-text sentiment prompt (a PromptSpec's fields): "bad" is class 0's word, "good" class 1's
SENTIMENT_PROMPT = {"instruction": "is the review positive or negative ?", "input_format": "review : {input}",
                    "template": "plain", "answer_prefix": "answer :",
                    "verbalizer": {"negative": ["bad"], "positive": ["good"]}}

#: family -> (its transformers config class, the tiny sizes): the random-weight causal LMs the prompted tests build
#: (tests/engine/test_prompted.py every family, test_prefix_cache.py three beside Gemma 3)
TINY_LM_FAMILIES = {
    "llama": ("LlamaConfig", {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "num_key_value_heads": 2}),
    "gpt2": ("GPT2Config", {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 256}),
    "qwen2": ("Qwen2Config", {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "num_key_value_heads": 2}),
    "qwen3": ("Qwen3Config", {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}),
    "mistral": ("MistralConfig", {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}),
    "gemma": ("GemmaConfig", {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}),
    "phi3": ("Phi3Config", {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                            "num_attention_heads": 4, "num_key_value_heads": 2}),
}


def tiny_llama(tok):
    """A causal Llama (2 layers, hidden 32, 4 heads, 2 key/value heads, eager attention) over `tok`'s vocabulary,
    its weights drawn after torch.manual_seed(0), in eval mode."""
    import torch
    import transformers

    config = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, pad_token_id=tok.pad_token_id,
                                      bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()


class FakeGenerator:
    """A self-explanation generator that answers without a model: `reply` is the reply to every request, or a
    function of the request (the prompt) that gives it. Counts its calls and keeps the requests."""

    def __init__(self, reply):
        self.reply = reply if callable(reply) else (lambda request: reply)
        self.last_cached = False
        self.calls = 0
        self.requests = []

    def chat_prompt(self, request: str) -> str:
        return request

    def generate(self, prompt: str, **_) -> str:
        self.calls += 1
        self.requests.append(prompt)
        return self.reply(prompt)

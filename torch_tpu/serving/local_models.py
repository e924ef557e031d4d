"""Small model directories made on this machine: a config, random weights and a tokenizer
trained here, for trying the server (and testing it) without a model hub.

    python -m torch_tpu.serving.local_models /tmp/tiny-llama --arch llama
    python -m vllm.entrypoints.openai.api_server --model /tmp/tiny-llama
"""

from __future__ import annotations

import argparse
import os

# Text the tokenizer learns its vocabulary from; any English will do.
_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A tensor is a multi-dimensional array of numbers on a device.",
    "Tensor processing units run compiled programs of matrix multiplications.",
    "Serving a language model means answering many requests at once, token by token.",
    "Once upon a time there was a small model that learned to count: one two three four.",
    "Paged attention keeps the keys and values of every request in blocks of memory.",
    "Hello world! How are you today? I am fine, thank you, and you?",
] * 20


def _tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(_CORPUS, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        # A chat template, so /v1/chat/completions has one to apply.
        chat_template=(
            "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}assistant:{% endif %}"
        ),
    )


# Widths and depths: "tiny" for tests, "small" for benchmarks (about 30M parameters).
SIZES = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2),
    "small": dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6),
}


def _config(arch: str, vocab_size: int, max_len: int, size: str):
    import transformers

    common = dict(
        vocab_size=vocab_size,
        **SIZES[size],
        num_attention_heads=8 if size == "small" else 4,
        num_key_value_heads=2,  # grouped-query attention
        max_position_embeddings=max_len,
        bos_token_id=1,
        eos_token_id=2,
        # Wide initial weights make the random model's logits decisive, so greedy decoding
        # is not a coin toss between near-equal tokens.
        initializer_range=0.5,
        tie_word_embeddings=False,
        dtype="float32",
    )
    if arch == "llama":
        return transformers.LlamaConfig(head_dim=64 if size == "small" else 32, **common)
    if arch == "qwen2":
        return transformers.Qwen2Config(**common)
    raise ValueError(f"unknown architecture {arch!r}: llama or qwen2")


def make_model(
    directory: str, arch: str = "llama", max_len: int = 256, seed: int = 0, size: str = "tiny"
) -> str:
    """Writes a random model of `arch` and `size` and its tokenizer to `directory`; returns it."""
    import torch
    import transformers

    tokenizer = _tokenizer(vocab_size=384)
    config = _config(arch, len(tokenizer), max_len, size)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    os.makedirs(directory, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("--arch", default="llama", choices=["llama", "qwen2"])
    parser.add_argument("--max-len", type=int, default=256)
    parser.add_argument("--size", default="tiny", choices=sorted(SIZES))
    arguments = parser.parse_args()
    print(make_model(arguments.directory, arguments.arch, arguments.max_len, size=arguments.size))

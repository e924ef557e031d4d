"""Builds the tokenizer and text dataset TorchTitan's debug configs read, with no network.

TorchTitan's ``llama3_debugmodel`` and ``qwen3_debugmodel`` read a Hugging Face tokenizer
from ``./tests/assets/tokenizer`` and the ``c4_test`` dataset from ``./tests/assets/c4_test``
(paths relative to the working directory). This writes both under ``DIR``:

    python -m torch_tpu.titan.assets DIR
    cd DIR && torchrun --nproc_per_node=2 -m torchtitan.train \\
        --module llama3 --config llama3_debugmodel

The text is the documentation of Python's own standard library (every module's and
public object's docstring), so it is real English prose that is on every machine; the
tokenizer is a byte-level BPE trained on it with the ``tokenizers`` library, sized to
the debug models' vocabulary (2048 entries).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import random
import sys
import warnings

VOCAB_SIZE = 2048
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
TOKENIZER_DIR = os.path.join("tests", "assets", "tokenizer")
DATASET_DIR = os.path.join("tests", "assets", "c4_test")

# Modules whose import has side effects (opening windows, printing, starting tests).
_SKIP = ("this", "antigravity", "idlelib", "tkinter", "turtle", "test", "lib2to3", "__main__")


def stdlib_documents(limit: int) -> list[str]:
    """Docstrings of the standard library, one document per module or public object."""
    names = sorted(sys.stdlib_module_names)
    documents: list[str] = []
    seen: set[str] = set()
    for name in names:
        if name.startswith("_") or name.startswith(_SKIP):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                module = importlib.import_module(name)
            except Exception:  # noqa: BLE001 - platform-specific modules are absent
                continue
        objects = [module] + [
            value
            for key, value in sorted(vars(module).items())
            if not key.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
        ]
        for obj in objects:
            text = inspect.getdoc(obj) or ""
            if len(text) >= 200 and text not in seen:
                seen.add(text)
                documents.append(text)
        if len(documents) >= limit:
            break
    return documents[:limit]


def build_tokenizer(documents: list[str], directory: str, vocab_size: int = VOCAB_SIZE) -> int:
    """Trains a byte-level BPE and writes tokenizer.json and tokenizer_config.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(documents, trainer=trainer)
    os.makedirs(directory, exist_ok=True)
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    config = {
        "bos_token": BOS,
        "eos_token": EOS,
        "add_bos_token": True,
        "add_eos_token": False,
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as file:
        json.dump(config, file, indent=2)
    return tokenizer.get_vocab_size()


def write_dataset(documents: list[str], directory: str, seed: int = 0) -> None:
    """One JSON-lines file with a "text" field, named as C4's shards so that
    ``load_dataset(dir, split="train")`` finds a train split."""
    os.makedirs(directory, exist_ok=True)
    shuffled = list(documents)
    random.Random(seed).shuffle(shuffled)
    with open(os.path.join(directory, "c4-train.00000-of-00001.json"), "w") as file:
        for text in shuffled:
            file.write(json.dumps({"text": text}) + "\n")


def build(root: str, documents: int = 4000) -> dict[str, object]:
    texts = stdlib_documents(documents)
    if len(texts) < 100:
        raise RuntimeError(f"found only {len(texts)} standard-library docstrings to learn from")
    vocab = build_tokenizer(texts, os.path.join(root, TOKENIZER_DIR))
    write_dataset(texts, os.path.join(root, DATASET_DIR))
    return {
        "root": os.path.abspath(root),
        "documents": len(texts),
        "characters": sum(len(t) for t in texts),
        "vocab_size": vocab,
        "overrides": [
            f"--hf_assets_path {os.path.abspath(os.path.join(root, TOKENIZER_DIR))}",
            f"--dataloader.dataset_path {os.path.abspath(os.path.join(root, DATASET_DIR))}",
        ],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="folder to write tests/assets/{tokenizer,c4_test} under")
    parser.add_argument("--documents", type=int, default=4000)
    args = parser.parse_args(argv)
    summary = build(args.root, args.documents)
    print(
        f"wrote {summary['documents']} documents ({summary['characters']:,} characters) and "
        f"a {summary['vocab_size']}-token tokenizer under {summary['root']}/tests/assets"
    )
    print("run TorchTitan from that folder, or from anywhere with:", *summary["overrides"])


if __name__ == "__main__":
    main()

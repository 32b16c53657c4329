"""A tiny word-level tokenizer for the tiny Llama, written locally (no hub).

Dynamo's frontend needs a tokenizer to preprocess and route, and ``dynamo.vllm`` forces
``skip_tokenizer_init=False``, so the model directory needs one even though every prompt is
sent as token ids. Token ``i`` is the word ``t<i>``; ids 0..2 are unk, bos and eos, matching
the tiny Llama's ``bos_token_id``/``eos_token_id``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["tokenizer_config", "vocabulary", "write_tokenizer"]

SPECIAL = ("<unk>", "<s>", "</s>")


def vocabulary(size: int) -> dict[str, int]:
    """Word -> id for *size* ids: the three specials, then ``t3`` .. ``t<size-1>``."""
    if size <= len(SPECIAL):
        raise ValueError(f"vocabulary size must exceed {len(SPECIAL)}, got {size}")
    vocab = {tok: i for i, tok in enumerate(SPECIAL)}
    vocab.update({f"t{i}": i for i in range(len(SPECIAL), size)})
    return vocab


def tokenizer_config(max_length: int) -> dict[str, Any]:
    """``tokenizer_config.json``: the fast tokenizer class and its special tokens."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": SPECIAL[0], "bos_token": SPECIAL[1], "eos_token": SPECIAL[2],
        "model_max_length": max_length,
        "add_bos_token": False, "add_eos_token": False,
        # a template, so the frontend can register a chat model without guessing one
        "chat_template": "{% for m in messages %}{{ m['content'] }} {% endfor %}",
    }


def write_tokenizer(model_dir: str | Path, *, vocab_size: int, max_length: int) -> Path:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` into *model_dir*."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    directory = Path(model_dir)
    directory.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordLevel(vocab=vocabulary(vocab_size), unk_token=SPECIAL[0]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(max_length), indent=2), encoding="utf-8")
    return directory

"""Writes the o200k_harmony tokenizer as Hugging Face files: tokenizer.json, tokenizer_config.json and
special_tokens_map.json, so that `transformers.AutoTokenizer` and `tokenizers` load a synthesized
checkpoint offline and encode text to the same ids as tiktoken.

tiktoken keeps only ranks: at each step it joins the adjacent pair of parts whose concatenation has
the lowest rank. A Hugging Face BPE model needs merge rules (left, right) in priority order instead.
Listing, for every token, each way of cutting it into two tokens, with the token's rank as priority,
makes the two agree: a pair is mergeable exactly when its concatenation is a token, and the lowest
rank wins. `ignore_merges` reproduces tiktoken's shortcut of taking a whole pre-token that is itself a
token. That is 446,189 merges; deriving them and writing the JSON takes ~2 s, so the finished
tokenizer.json is cached under <cache>/tokenizers/, keyed by the vocabulary's sha256 and this format's
version, and later calls only copy it.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from quickmoe.paths import atomic_copy, atomic_write_bytes, cache_dir
from quickmoe.tokenizer.byte_level import bytes_to_text
from quickmoe.tokenizer.vocab import (ENDOFTEXT, O200K_BASE_SHA256, O200K_PATTERN, RETURN, STARTOFTEXT, VOCAB_SIZE,
                                      o200k_base_file, read_tiktoken_file, special_token_names)

logger = logging.getLogger(__name__)

EXPORT_FORMAT_VERSION = 1  # bump when the written tokenizer.json changes
MODEL_MAX_LENGTH = 131072  # gpt-oss context length


def merge_rules(tokens_by_rank: list[bytes]) -> list[tuple[int, int]]:
    """(left id, right id) for every cut of every token into two tokens; ordered by the joined token's
    rank, then by the left part's rank."""
    rank_of = {token: rank for rank, token in enumerate(tokens_by_rank)}.get
    rules: list[tuple[int, int]] = []
    for token in tokens_by_rank:
        cuts = []
        for cut in range(1, len(token)):
            left, right = rank_of(token[:cut]), rank_of(token[cut:])
            if left is not None and right is not None:
                cuts.append((left, right))
        rules.extend(sorted(cuts))
    return rules


def _added_token(token_id: int, content: str) -> dict[str, Any]:
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def tokenizer_json(tokens_by_rank: list[bytes]) -> dict[str, Any]:
    """The tokenizer.json document: byte-level BPE over o200k, the o200k split regex, the specials."""
    texts = [bytes_to_text(token) for token in tokens_by_rank]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added_token(i, text) for i, text in special_token_names().items()],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": O200K_PATTERN}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": None,
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
            "vocab": {text: rank for rank, text in enumerate(texts)},
            # "left right" strings (byte-level tokens hold no space): `tokenizers` loads these 2x faster
            "merges": [f"{texts[left]} {texts[right]}" for left, right in merge_rules(tokens_by_rank)],
        },
    }


def special_tokens_map() -> dict[str, str]:
    names = special_token_names()
    return {"bos_token": names[STARTOFTEXT], "eos_token": names[RETURN], "pad_token": names[ENDOFTEXT]}


def tokenizer_config() -> dict[str, Any]:
    return {"tokenizer_class": "PreTrainedTokenizerFast", **special_tokens_map(),
            "model_max_length": MODEL_MAX_LENGTH, "clean_up_tokenization_spaces": False,
            "model_input_names": ["input_ids", "attention_mask"]}


def cached_tokenizer_json() -> Path:
    """The cached o200k_harmony tokenizer.json, derived and written on first use."""
    vocab_file = o200k_base_file()  # verified to have sha256 O200K_BASE_SHA256
    path = (cache_dir() / "tokenizers" / f"o200k_harmony-{O200K_BASE_SHA256[:16]}-v{EXPORT_FORMAT_VERSION}"
            / "tokenizer.json")
    if path.is_file():
        return path
    started = time.perf_counter()
    tokens_by_rank = read_tiktoken_file(vocab_file)
    data = json.dumps(tokenizer_json(tokens_by_rank), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    atomic_write_bytes(path, data)
    logger.info("derived the o200k_harmony tokenizer.json (%d ids, %.1f MB) in %.1f s; cached at %s",
                VOCAB_SIZE, len(data) / 1e6, time.perf_counter() - started, path)
    return path


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def write_tokenizer_files(out_dir: Path) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json of gpt-oss's tokenizer
    (o200k_harmony) into `out_dir` (created if missing)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_copy(cached_tokenizer_json(), out / "tokenizer.json")
    _write_json(out / "tokenizer_config.json", tokenizer_config())
    _write_json(out / "special_tokens_map.json", special_tokens_map())

"""The small JSON files of a model directory that a tokenizer reads besides tokenizer.json: the eos tokens of
generation_config.json (`eos_token_id`), tokenizer_config.json and special_tokens_map.json (`eos_token`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quickmoe.errors import TokenizerError
from quickmoe.paths import read_regular
from quickmoe.tokenizer.vocab import GPT_OSS_EOS_TOKEN_IDS

__all__ = ["TOKENIZER_FILE", "read_eos_token_ids", "read_json_object", "read_tokenizer_file"]

TOKENIZER_FILE = "tokenizer.json"


def read_tokenizer_file(path: Path) -> bytes:
    """The bytes of a tokenizer.json (a FIFO or a device is refused, never waited on)."""
    try:
        return read_regular(path)
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read it ({exc})") from None


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file holding an object; {} if the file does not exist."""
    try:
        text = read_regular(path).decode("utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenizerError(f"{path}: cannot read it ({exc})") from exc
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TokenizerError(f"{path}: not valid JSON ({exc}); expected a JSON object") from exc
    if not isinstance(obj, dict):
        raise TokenizerError(f"{path}: expected a JSON object, found {type(obj).__name__}")
    return obj


def _eos_token_from(path: Path, token_to_id: Callable[[str], int | None], vocabulary: str) -> int | None:
    eos = read_json_object(path).get("eos_token")
    if isinstance(eos, dict):
        eos = eos.get("content")
    if eos is None:
        return None
    if not isinstance(eos, str):
        raise TokenizerError(f"{path}: eos_token = {eos!r}, expected a token string")
    token_id = token_to_id(eos)
    if token_id is None:
        raise TokenizerError(f"{path}: eos_token {eos!r} is not a token of {vocabulary}")
    return token_id


def read_eos_token_ids(model_dir: Path, vocab_size: int, token_to_id: Callable[[str], int | None],
                       uses_harmony: bool, vocabulary: str) -> tuple[int, ...]:
    """The ids that end a plain-text generation: generation_config.json's `eos_token_id` (an id or a list), then
    the `eos_token` of tokenizer_config.json and special_tokens_map.json (a token string, looked up with
    `token_to_id`), then harmony's (<|return|>, <|endoftext|>, <|call|>) for a harmony vocabulary; in that order,
    each once. `vocabulary` names the tokenizer file in errors."""
    found: list[int] = []
    generation_config = model_dir / "generation_config.json"
    eos = read_json_object(generation_config).get("eos_token_id")
    for token_id in eos if isinstance(eos, list) else [eos]:
        if token_id is None:
            continue
        if not isinstance(token_id, int) or not 0 <= token_id < vocab_size:
            raise TokenizerError(f"{generation_config}: eos_token_id {token_id!r} is not a token id in "
                                 f"[0, {vocab_size})")
        found.append(token_id)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        token_id = _eos_token_from(model_dir / name, token_to_id, vocabulary)
        if token_id is not None:
            found.append(token_id)
    if uses_harmony:
        found.extend(GPT_OSS_EOS_TOKEN_IDS)
    return tuple(dict.fromkeys(found))

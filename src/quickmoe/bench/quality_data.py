"""The held-out text of `bench quality`: files of text (the embedded model's held-out stdlib files ship with the
package), tokenized with the model's own tokenizer into one stream (files joined by the first eos id), cut into
evaluation windows and greedy prompts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from quickmoe.checkpoint.default_model import embedded_model_dir
from quickmoe.errors import ConfigError

HELDOUT_FILE = "heldout.jsonl"


@dataclass(frozen=True)
class HeldoutText:
    """Texts by name (a jsonl line {"path", "text"} each, or one plain-text file)."""

    source: str
    texts: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if not self.texts or not any(text for _, text in self.texts):
            raise ConfigError(f"held-out set {self.source}: no text")


def default_heldout_path() -> Path:
    return embedded_model_dir() / HELDOUT_FILE


def read_heldout(path: str | Path | None = None) -> HeldoutText:
    """The held-out texts of `path` (.jsonl: {"path", "text"} per line; anything else: one text), by default the
    embedded model's held-out stdlib files."""
    p = Path(path) if path is not None else default_heldout_path()
    try:
        raw = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"held-out set {p}: cannot read it ({exc})") from None
    if p.suffix != ".jsonl":
        return HeldoutText(str(p), ((p.name, raw),))
    texts = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            texts.append((str(item["path"]), str(item["text"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"held-out set {p}, line {n}: expected {{\"path\": ..., \"text\": ...}} ({exc})") \
                from None
    return HeldoutText(str(p), tuple(texts))


def token_stream(tokenizer, heldout: HeldoutText) -> list[int]:
    """Every text's tokens, each followed by the tokenizer's first eos id."""
    eos = tokenizer.eos_token_ids[0] if tokenizer.eos_token_ids else None
    stream: list[int] = []
    for _, text in heldout.texts:
        stream += tokenizer.encode(text)
        if eos is not None:
            stream.append(eos)
    return stream


def windows(stream: list[int], length: int, max_tokens: int) -> list[list[int]]:
    """Consecutive windows of `length` tokens from the start of the stream, at most `max_tokens` tokens in all
    (each window predicts its last length-1 tokens)."""
    if length < 2:
        raise ConfigError(f"bench quality: window length {length}: expected >= 2")
    n = min(len(stream), max_tokens) // length
    return [stream[i * length:(i + 1) * length] for i in range(n)]


def prompts(stream: list[int], count: int, length: int) -> list[list[int]]:
    """`count` prompts of `length` tokens, starting at evenly spread offsets of the stream."""
    if len(stream) < length + count:
        raise ConfigError(f"bench quality: the held-out stream ({len(stream)} tokens) is too short for {count} "
                          f"prompts of {length} tokens")
    step = (len(stream) - length) // count
    return [stream[i * step:i * step + length] for i in range(count)]

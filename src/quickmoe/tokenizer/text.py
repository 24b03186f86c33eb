"""Text that can be encoded: what every tokenizer and the chat renderer do with strings UTF-8 cannot hold."""

from __future__ import annotations

__all__ = ["replace_lone_surrogates"]


def replace_lone_surrogates(text: str) -> str:
    """`text` with surrogate pairs joined and lone surrogates (not encodable as UTF-8; JSON allows them, e.g.
    "\\ud800") replaced by U+FFFD, as tiktoken and openai-harmony do."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")

"""The byte-level alphabet of Hugging Face BPE tokenizers (`ByteLevel` pre-tokenizer and decoder).

tokenizer.json stores tokens as JSON text, so each of the 256 byte values stands for one printable
character: the 188 bytes that are printable Latin-1 (except the space and soft hyphen) stand for
themselves, and the other 68, in increasing order, for U+0100, U+0101, ... The `tokenizers` library
uses exactly this table, so ours must match it character for character.
"""

from __future__ import annotations

from functools import lru_cache


def _stands_for_itself(byte: int) -> bool:
    return 0x21 <= byte <= 0x7E or 0xA1 <= byte <= 0xAC or 0xAE <= byte <= 0xFF


@lru_cache(maxsize=1)
def byte_chars() -> tuple[str, ...]:
    """byte value -> the character that stands for it."""
    chars: list[str] = []
    next_extra = 0x100
    for byte in range(256):
        if _stands_for_itself(byte):
            chars.append(chr(byte))
        else:
            chars.append(chr(next_extra))
            next_extra += 1
    return tuple(chars)


@lru_cache(maxsize=1)
def char_bytes() -> dict[str, int]:
    """The inverse of `byte_chars`: character -> byte value."""
    return {char: byte for byte, char in enumerate(byte_chars())}


def bytes_to_text(data: bytes) -> str:
    """Bytes as byte-level characters (the form of a token in tokenizer.json)."""
    chars = byte_chars()
    return "".join([chars[b] for b in data])


def text_to_bytes(text: str) -> bytes | None:
    """A byte-level token string back to its bytes; None if it holds a character outside the alphabet."""
    lookup = char_bytes()
    try:
        return bytes([lookup[c] for c in text])
    except KeyError:
        return None

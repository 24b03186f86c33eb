"""Recognising a model directory's tokenizer.json as o200k_harmony, so it loads in a third of the time.

gpt-oss checkpoints carry o200k_harmony as a Hugging Face tokenizer.json: 201,088 ids and 446,189 merge rules.
`tokenizers` parses that file in ~0.6 s holding the GIL, and at start-up it runs beside the imports, which need
the GIL too, so the whole parse lands on weights_ready. openai-harmony builds the same tokenizer from the
o200k_base ranks in ~0.2 s (its Rust BPE is tiktoken's algorithm, the reference gpt-oss was trained with; the
tests check that both encode alike).

Whether a file *is* o200k_harmony is decided once per file content and remembered: the verdict, keyed by the
file's sha256 (~10 ms to compute), lies under <cache>/tokenizers/recognised-v1/. A file is recognised when its
whole document equals the one `write_tokenizer_files` writes for o200k_harmony (merge rules compared as pairs,
whether written "a b" or ["a", "b"]; the "version" field aside): added tokens, normalizer, pre-tokenizer,
decoder, post-processor, truncation, padding and the BPE model with every rank and rule. Anything else, even a
reordered rule, is not recognised and loads through `tokenizers` as before: a miss costs time, never tokens.

Deciding takes ~0.5 s of JSON work (~2.5 s the first time, when o200k_harmony's own document is derived), so
when a start finds no verdict it loads the file through `tokenizers` and leaves the decision to a background
process (`python -m quickmoe.tokenizer.recognise FILE DIGEST`, lowered priority); the next start finds it.
QUICKMOE_TOKENIZER_RECOGNITION=0 turns recognition off (every tokenizer.json through `tokenizers`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from quickmoe.paths import atomic_write_bytes, cache_dir, read_regular
from quickmoe.tokenizer.vocab import O200K_BASE_NUM_RANKS

__all__ = ["RECOGNITION_VERSION", "cached_verdict", "decide_now", "file_digest", "is_o200k_harmony_document",
           "recognise", "recognition_enabled", "request_recognition"]

logger = logging.getLogger(__name__)

RECOGNITION_VERSION = 1  # bump when what counts as recognised changes: older verdicts are then ignored
PENDING_SECONDS = 600.0  # a background decision not finished by then is taken as dead, and may be started again


def recognition_enabled() -> bool:
    return os.environ.get("QUICKMOE_TOKENIZER_RECOGNITION", "1") != "0"


def file_digest(data: bytes) -> str:
    """sha256 of a tokenizer.json's bytes (hashlib releases the GIL for buffers this large)."""
    return hashlib.sha256(data).hexdigest()


def _verdict_dir() -> Path:
    return cache_dir() / "tokenizers" / f"recognised-v{RECOGNITION_VERSION}"


def cached_verdict(digest: str) -> bool | None:
    """True: the file with this sha256 is o200k_harmony; False: it is not; None: not decided yet (or unreadable)."""
    try:
        verdict = json.loads(read_regular(_verdict_dir() / f"{digest}.json"))
    except (OSError, ValueError):
        return None
    value = verdict.get("o200k_harmony") if isinstance(verdict, dict) else None
    return value if isinstance(value, bool) else None


def _normalised(document: Any) -> Any:
    """The document with merge rules as pairs and without "version" (neither changes how text is tokenized)."""
    if not isinstance(document, dict):
        return document
    document = {key: value for key, value in document.items() if key != "version"}
    model = document.get("model")
    if isinstance(model, dict) and isinstance(model.get("merges"), list):
        rules = [tuple(rule.split(" ")) if isinstance(rule, str) else tuple(rule) if isinstance(rule, list) else rule
                 for rule in model["merges"]]
        document["model"] = {**model, "merges": rules}
    return document


def is_o200k_harmony_document(document: Any) -> bool:
    """Whether a parsed tokenizer.json is, field for field, the o200k_harmony document quickmoe exports."""
    model = document.get("model") if isinstance(document, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if not isinstance(vocab, dict) or len(vocab) != O200K_BASE_NUM_RANKS:
        return False  # most files stop here, before o200k_harmony's own document is read or derived
    return _normalised(document) == _reference_document()


@lru_cache(maxsize=1)
def _reference_document() -> Any:
    """o200k_harmony's own document, normalised (derived on first use, then read from quickmoe's cache)."""
    from quickmoe.tokenizer.export import cached_tokenizer_json

    return _normalised(json.loads(read_regular(cached_tokenizer_json())))


def recognise(path: Path) -> bool:
    """Decide whether the tokenizer.json at `path` is o200k_harmony, and remember it under its sha256."""
    data = read_regular(path)
    digest = file_digest(data)  # of the bytes decided on, should the file have changed since it was requested
    try:
        document = json.loads(data)
    except ValueError:
        document = None  # not JSON: not o200k_harmony (loading it through `tokenizers` reports the error)
    verdict = is_o200k_harmony_document(document)
    atomic_write_bytes(_verdict_dir() / f"{digest}.json",
                       json.dumps({"o200k_harmony": verdict, "bytes": len(data), "file": str(path)}).encode())
    return verdict


def decide_now(path: Path) -> None:
    """Decide `path` here and now unless recognition is off, the file is absent or its verdict is known (what a
    background decision leaves for the next start, made before it: `bench coldstart` before its timed starts)."""
    if recognition_enabled() and path.is_file() and cached_verdict(file_digest(read_regular(path))) is None:
        recognise(path)


def request_recognition(path: Path, digest: str) -> bool:
    """Start a background process that decides `path` (unless one started less than PENDING_SECONDS ago);
    returns whether one was started. Never raises: recognition only ever saves time."""
    try:
        directory = _verdict_dir()
        directory.mkdir(parents=True, exist_ok=True)
        pending = directory / f"{digest}.pending"
        try:
            fd = os.open(pending, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if time.time() - pending.stat().st_mtime < PENDING_SECONDS:
                return False
            pending.touch()
        else:
            os.close(fd)
        process = subprocess.Popen(
            [sys.executable, "-m", "quickmoe.tokenizer.recognise", str(path), digest],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        threading.Thread(target=process.wait, name="quickmoe-tokenizer-recognition", daemon=True).start()  # reaps it
        return True
    except OSError as exc:
        logger.debug("could not start the tokenizer recognition of %s: %s", path, exc)
        return False


def main(argv: list[str]) -> int:
    """`python -m quickmoe.tokenizer.recognise FILE DIGEST`: decide FILE, remember the verdict, drop DIGEST's
    pending marker."""
    path, digest = Path(argv[0]), argv[1]
    try:
        os.nice(10)
    except OSError:
        pass
    try:
        recognise(path)
        return 0
    except Exception as exc:  # noqa: BLE001 - a background helper: it reports and leaves no verdict
        print(f"quickmoe: could not decide whether {path} is o200k_harmony: {exc}", file=sys.stderr)
        return 1
    finally:
        (_verdict_dir() / f"{digest}.pending").unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The demo model's corpus: the Python standard library's own source code (PSF license), found on this machine.

Selection rule (documented in the manifest the export writes): every `*.py` file under
`sysconfig.get_paths()["stdlib"]`, by sorted relative path, except the directories `EXCLUDED_DIRS` (tests, vendored
or generated code, IDLE, demos) and files over `MAX_FILE_BYTES`; decoded as UTF-8 (files that are not are skipped).
Held out: the files whose relative path hashes (sha256) to 0 mod `HELDOUT_MODULUS`, never trained on; their text
ships with the package (quickmoe/checkpoint/embedded/heldout.jsonl) so every machine evaluates the same text,
whatever its Python. The training set is everything else of the machine's stdlib, so it differs between Python
versions: training is reproducible on one machine (the manifest records the file count and a hash of the text).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sysconfig
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

EXCLUDED_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages", "idlelib", "lib2to3",
                           "turtledemo", "__pycache__", "ensurepip", "pydoc_data", "encodings"})
MAX_FILE_BYTES = 256 * 1024
HELDOUT_MODULUS = 40
LICENSE = ("Python Software Foundation License Version 2 (PSF-2.0): the CPython standard library's source, "
           "as installed with Python (see LICENSE.txt in the stdlib directory)")


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative to the stdlib directory, '/'-separated
    text: str


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def is_heldout(rel_path: str) -> bool:
    return hashlib.sha256(rel_path.encode()).digest()[0] % HELDOUT_MODULUS == 0


def stdlib_files(root: Path | None = None) -> list[SourceFile]:
    """Every selected file of the stdlib (held out or not), sorted by relative path."""
    root = root or stdlib_dir()
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(part in EXCLUDED_DIRS or part.startswith("config-") for part in rel.parts[:-1]) or path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError) as exc:
            logger.warning("skipping %s: %s", rel, exc)
            continue
        found.append(SourceFile(rel.as_posix(), text))
    return found


def split(files: list[SourceFile]) -> tuple[list[SourceFile], list[SourceFile]]:
    """(training files, held-out files)."""
    train = [f for f in files if not is_heldout(f.path)]
    held = [f for f in files if is_heldout(f.path)]
    return train, held


def corpus_hash(files: list[SourceFile]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.path.encode() + b"\0" + f.text.encode() + b"\0")
    return h.hexdigest()


def write_heldout(path: Path, files: list[SourceFile]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for f in files:
            out.write(json.dumps({"path": f.path, "text": f.text}, ensure_ascii=False) + "\n")


def read_heldout(path: Path) -> list[SourceFile]:
    return [SourceFile(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line]

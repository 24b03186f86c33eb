"""Reads a Hugging Face safetensors checkpoint (one `model.safetensors`, or shards with
`model.safetensors.index.json`) without the safetensors library.

Construction parses the index and every shard header (headers only) and checks them against each other
and against the file sizes, so a corrupt or truncated checkpoint fails before any data is read. Each
tensor's location is explicit (file, absolute offset, byte length; `entries_by_file` in offset order):
the seam for the streaming GPU loader. `validate` compares the checkpoint with what a model expects and
reports every problem at once. Tensors are read with seek + readinto into owning uint8 buffers, one at
a time; nothing is memory-mapped and no whole state dict is held.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO, NamedTuple

import torch

from quickmoe.checkpoint.header_cache import parse_header_cached
from quickmoe.checkpoint.safetensors_header import ShardHeader, TensorEntry, dtype_name
from quickmoe.errors import CheckpointError
from quickmoe.paths import open_regular, read_regular

__all__ = ["CheckpointReader", "TensorEntry", "TensorSpec", "INDEX_NAME", "SINGLE_NAME"]

logger = logging.getLogger(__name__)

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
MAX_REPORTED = 20


class TensorSpec(NamedTuple):
    """A tensor a model expects: name, shape, dtype (or one of `alt_dtypes`: e.g. FP8 scales in bf16 or float32)."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    alt_dtypes: tuple[torch.dtype, ...] = ()


class CheckpointReader:
    """The tensors of a checkpoint directory, located and checked at construction; data read on demand.

    Attributes: `model_dir`; `files` (shards in order); `entries` (name -> TensorEntry); `entries_by_file`
    (file -> entries in offset order); `shards` (file -> parsed ShardHeader, with metadata); `total_bytes`
    (tensor bytes over all shards); `index_path` (None for a single-file checkpoint).
    """

    def __init__(self, model_dir: str | Path) -> None:
        self.model_dir = Path(model_dir)
        self.index_path: Path | None = None
        weight_map = self._discover()
        self.shards: Mapping[Path, ShardHeader] = MappingProxyType({f: parse_header_cached(f) for f in self.files})
        entries: dict[str, TensorEntry] = {}
        shard_of: dict[str, str] = {}  # tensor name -> its shard's file name, as the index maps them
        for file, shard in self.shards.items():
            shard_name = file.name
            for entry in shard.entries:
                other = entries.get(entry.name)
                if other is not None:
                    raise CheckpointError(f"{self.model_dir}: tensor {entry.name} is in two shards: "
                                          f"{other.file.name} and {entry.file.name} (expected exactly one)")
                entries[entry.name] = entry
                shard_of[entry.name] = shard_name
        if weight_map is not None and shard_of != weight_map:  # one comparison in C; the report names each problem
            self._check_index(weight_map, entries)
        self.entries: Mapping[str, TensorEntry] = MappingProxyType(entries)
        self.entries_by_file: Mapping[Path, tuple[TensorEntry, ...]] = MappingProxyType(
            {f: s.entries for f, s in self.shards.items()})
        self.total_bytes: int = sum(e.nbytes for e in entries.values())
        logger.debug("%s: %d tensors, %d bytes in %d file(s)", self.model_dir, len(entries), self.total_bytes,
                     len(self.files))

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __repr__(self) -> str:
        return (f"CheckpointReader({str(self.model_dir)!r}: {len(self.entries)} tensors, {self.total_bytes} bytes, "
                f"{len(self.files)} file(s))")

    # -- construction -----------------------------------------------------------------------------------

    def _discover(self) -> dict[str, str] | None:
        """Find the index or the single file; set `files` and `index_path`; return the weight map if any."""
        d = self.model_dir
        if not d.exists():
            raise CheckpointError(f"{d}: checkpoint directory does not exist")
        if not d.is_dir():
            raise CheckpointError(f"{d}: not a directory (expected a checkpoint directory)")
        index_path = d / INDEX_NAME
        if index_path.exists():  # not a regular file: refused when it is read
            self.index_path = index_path
            weight_map = _read_index(index_path)
            self.files = sorted(d / shard for shard in set(weight_map.values()))  # one Path per shard, not tensor
            missing = [f for f in self.files if not f.exists()]
            if missing:
                f = missing[0]
                names = sorted(n for n, shard in weight_map.items() if shard == f.name)
                raise CheckpointError(f"{index_path}: shard file {f.name} does not exist in {d} (the index names it "
                                      f"for {len(names)} tensor(s), e.g. {names[0]}); {len(missing)} of "
                                      f"{len(self.files)} shard file(s) missing")
            indexed = set(self.files)
            stray = sorted(p.name for p in d.glob("*.safetensors") if p not in indexed)
            if stray:
                logger.warning("%s: ignoring safetensors file(s) not named by %s: %s", d, INDEX_NAME,
                               ", ".join(stray))
            return weight_map
        if (d / SINGLE_NAME).exists():
            self.files = [d / SINGLE_NAME]
            return None
        found = sorted(p.name for p in d.glob("*.safetensors"))
        hint = (f"found {', '.join(found[:5])}{' ...' if len(found) > 5 else ''} but no index" if found
                else "found no *.safetensors file")
        raise CheckpointError(f"{d}: no safetensors checkpoint (expected {SINGLE_NAME}, or shards with "
                              f"{INDEX_NAME}; {hint})")

    def _check_index(self, weight_map: Mapping[str, str], entries: Mapping[str, TensorEntry]) -> None:
        problems = []
        for name, shard in sorted(weight_map.items()):
            entry = entries.get(name)
            if entry is None:
                problems.append(f"missing index target: tensor {name} is indexed in {shard} but is not in its "
                                "header (nor in any other shard)")
            elif entry.file.name != shard:
                problems.append(f"missing index target: tensor {name} is indexed in {shard} but is not in its "
                                f"header (found in {entry.file.name})")
        for name in sorted(set(entries) - set(weight_map)):
            problems.append(f"missing index entry: tensor {name} is in {entries[name].file.name} but not in the "
                            "index")
        if problems:
            raise CheckpointError(_report(f"{self.index_path}: index does not match the shard headers", problems))

    # -- checking against a model ----------------------------------------------------------------------

    def validate(self, expected: Mapping[str, TensorSpec] | Iterable[TensorSpec]) -> None:
        """Raise one CheckpointError listing every missing, unexpected, mis-shaped or mis-typed tensor.

        `expected` is a mapping name -> spec (the key is the name) or an iterable of specs.
        """
        specs = expected if isinstance(expected, Mapping) else {s.name: s for s in expected}
        entries = self.entries
        problems = []
        if specs.keys() != entries.keys():  # set comparisons of the key views; the names sorted only when they differ
            for name in sorted(specs.keys() - entries.keys()):
                problems.append(f"missing tensor {name}: expected {_fmt(specs[name].shape, specs[name].dtype)}, "
                                "found in no file")
            for name in sorted(entries.keys() - specs.keys()):
                e = entries[name]
                problems.append(f"unexpected tensor {name} in {e.file.name}: the model has no such parameter, "
                                f"found {_fmt(e.shape, e.dtype)}")
        mismatched = []  # one pass over the specs (~74,000 for an NVFP4 Qwen3-30B-A3B): no sets, no sort
        for name, s in specs.items():
            e = entries.get(name)
            if e is not None and (tuple(s.shape) != e.shape or (s.dtype != e.dtype and e.dtype not in s.alt_dtypes)):
                mismatched.append(name)
        for name in sorted(mismatched):
            s, e = specs[name], entries[name]
            bad_dtype = s.dtype != e.dtype and e.dtype not in s.alt_dtypes
            what = [w for w, bad in (("shape", tuple(s.shape) != e.shape), ("dtype", bad_dtype)) if bad]
            problems.append(f"wrong {' and '.join(what)} for tensor {name} in {e.file.name}: expected "
                            f"{_fmt(s.shape, s.dtype)}, found {_fmt(e.shape, e.dtype)}")
        if problems:
            raise CheckpointError(_report(f"checkpoint {self.model_dir} does not match the model", problems))

    # -- reading ----------------------------------------------------------------------------------------

    def read(self, name: str) -> torch.Tensor:
        """One tensor as a CPU tensor of its dtype and shape, owning its memory."""
        entry = self._entry(name)
        try:
            with os.fdopen(open_regular(entry.file), "rb", buffering=0) as fh:
                return _read_entry(fh, entry)
        except OSError as exc:
            raise CheckpointError(f"{entry.file}: cannot read tensor {name} ({exc})") from None

    def iter_tensors(self, names: Iterable[str] | None = None) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, tensor) for `names` (default: all), shard by shard in offset order: sequential reads,
        one open file handle per shard. Unknown names raise before anything is read."""
        if names is None:
            wanted = None
        else:
            wanted = set(names)
            for name in sorted(wanted - set(self.entries)):
                self._entry(name)  # raises, naming it
        for file, file_entries in self.entries_by_file.items():
            todo = [e for e in file_entries if wanted is None or e.name in wanted]
            if not todo:
                continue
            logger.debug("reading %d tensor(s), %d bytes from %s", len(todo), sum(e.nbytes for e in todo), file)
            try:
                with os.fdopen(open_regular(file), "rb", buffering=0) as fh:
                    for entry in todo:
                        yield entry.name, _read_entry(fh, entry)
            except OSError as exc:
                raise CheckpointError(f"{file}: cannot read ({exc})") from None

    def _entry(self, name: str) -> TensorEntry:
        entry = self.entries.get(name)
        if entry is None:
            close = difflib.get_close_matches(name, list(self.entries), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise CheckpointError(f"tensor {name} is not in checkpoint {self.model_dir}{hint}")
        return entry


def _read_entry(fh: BinaryIO, entry: TensorEntry) -> torch.Tensor:
    """Read one tensor at its absolute offset into a fresh uint8 buffer, then view it as dtype/shape."""
    logger.debug("read %s from %s: %d bytes at offset %d", entry.name, entry.file.name, entry.nbytes, entry.offset)
    buf = torch.empty(entry.nbytes, dtype=torch.uint8)
    view = memoryview(buf.numpy())
    fh.seek(entry.offset)
    got = 0
    while got < entry.nbytes:  # one readinto may return less (e.g. > 2 GiB on Linux)
        n = fh.readinto(view[got:])
        if not n:
            break
        got += n
    if got != entry.nbytes:
        raise CheckpointError(f"{entry.file}: short read of tensor {entry.name}: expected {entry.nbytes} bytes at "
                              f"offset {entry.offset}, got {got} (the file was truncated or changed after opening)")
    return buf.view(entry.dtype).reshape(entry.shape)


def _read_index(index_path: Path) -> dict[str, str]:
    try:
        index = json.loads(read_regular(index_path).decode("utf-8"))
    except OSError as exc:
        raise CheckpointError(f"{index_path}: cannot read the index ({exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{index_path}: corrupt index: not valid UTF-8 JSON ({exc})") from None
    if not isinstance(index, dict):
        raise CheckpointError(f"{index_path}: corrupt index: expected a JSON object, found {type(index).__name__}")
    if "weight_map" not in index:
        raise CheckpointError(f"{index_path}: corrupt index: no \"weight_map\" (expected tensor name -> shard file)")
    weight_map = index["weight_map"]
    if not isinstance(weight_map, dict) or not weight_map:
        found = "an empty object" if isinstance(weight_map, dict) else type(weight_map).__name__
        raise CheckpointError(f"{index_path}: corrupt index: \"weight_map\" must be a non-empty object (tensor "
                              f"name -> shard file), found {found}")
    try:
        shards = set(weight_map.values())  # a few shard names for ~40,000 tensors
    except TypeError:  # an unhashable value: the loop below names its tensor
        shards = None
    if shards is not None and all(_is_shard_name(shard) for shard in shards):
        return weight_map
    for name, shard in weight_map.items():
        if not _is_shard_name(shard):
            raise CheckpointError(f"{index_path}: tensor {name}: weight_map value {shard!r} is not a shard file name "
                                  "in the checkpoint directory")
    return weight_map


def _is_shard_name(shard: object) -> bool:
    """A file name inside the checkpoint directory (no path)."""
    return (isinstance(shard, str) and bool(shard) and "/" not in shard and "\\" not in shard
            and shard not in (".", ".."))


def _report(title: str, problems: list[str]) -> str:
    shown = "\n  ".join(problems[:MAX_REPORTED])
    more = f"\n  ... and {len(problems) - MAX_REPORTED} more" if len(problems) > MAX_REPORTED else ""
    return f"{title} ({len(problems)} problem(s)):\n  {shown}{more}"


def _fmt(shape: Iterable[int], dtype: torch.dtype) -> str:
    return f"{dtype_name(dtype)} {list(shape)}"

"""Reads a Hugging Face safetensors checkpoint (one `model.safetensors`, or shards with
`model.safetensors.index.json`) without the safetensors library.

Construction parses the index and every shard header (headers only) and checks them against each other
and against the file sizes, so a corrupt or truncated checkpoint fails before any data is read. Each
tensor's location is explicit (file, absolute offset, byte length): the seam for the streaming GPU
loader. `validate` compares the checkpoint with what a model expects and reports every problem at once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from quickmoe.checkpoint.safetensors_header import DTYPES, parse_header
from quickmoe.errors import CheckpointError

logger = logging.getLogger(__name__)

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
MAX_REPORTED = 20


@dataclass(frozen=True)
class TensorSpec:
    """A tensor a model expects: name, shape, dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class TensorEntry:
    """Where a checkpoint tensor lives: file, absolute byte offset, byte length, dtype and shape."""

    name: str
    file: Path
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int
    nbytes: int


class CheckpointReader:
    """The tensors of a checkpoint directory, located and checked; data is read on demand."""

    def __init__(self, model_dir: str | Path) -> None:
        self.model_dir = Path(model_dir)
        if not self.model_dir.is_dir():
            raise CheckpointError(f"{self.model_dir}: not a directory (expected a checkpoint directory)")
        index_path = self.model_dir / INDEX_NAME
        if index_path.is_file():
            weight_map = _read_index(index_path)
            self.files = sorted({self.model_dir / f for f in weight_map.values()})
        elif (self.model_dir / SINGLE_NAME).is_file():
            weight_map = None
            self.files = [self.model_dir / SINGLE_NAME]
        else:
            raise CheckpointError(f"{self.model_dir}: no {INDEX_NAME} and no {SINGLE_NAME} (expected safetensors "
                                  "weights)")
        for f in self.files:
            if not f.is_file():
                names = sorted(n for n, shard in (weight_map or {}).items() if self.model_dir / shard == f)
                raise CheckpointError(f"{index_path}: shard {f.name} does not exist (named for {len(names)} "
                                      f"tensor(s), e.g. {names[0]})")
        entries: dict[str, TensorEntry] = {}
        for f in self.files:
            for entry in parse_header(f):
                if entry.name in entries:
                    raise CheckpointError(f"tensor {entry.name} is in two shards: {entries[entry.name].file.name} "
                                          f"and {f.name}")
                entries[entry.name] = TensorEntry(entry.name, f, entry.dtype, entry.shape, entry.offset,
                                                  entry.nbytes)
        if weight_map is not None:
            _check_index_against_shards(index_path, weight_map, entries)
        self.entries: Mapping[str, TensorEntry] = entries
        self.total_bytes = sum(e.nbytes for e in entries.values())

    def validate(self, expected: Mapping[str, TensorSpec] | Iterable[TensorSpec]) -> None:
        """Raise one CheckpointError listing every missing, unexpected, mis-shaped or mis-typed tensor."""
        specs = expected if isinstance(expected, Mapping) else {s.name: s for s in expected}
        problems = []
        for name in sorted(set(specs) - set(self.entries)):
            s = specs[name]
            problems.append(f"missing tensor {name} (expected {_fmt(s.shape, s.dtype)})")
        for name in sorted(set(self.entries) - set(specs)):
            problems.append(f"unexpected tensor {name} in {self.entries[name].file.name} (the model has no such "
                            "parameter)")
        for name in sorted(set(specs) & set(self.entries)):
            s, e = specs[name], self.entries[name]
            if s.shape != e.shape or s.dtype != e.dtype:
                problems.append(f"tensor {name} in {e.file.name}: expected {_fmt(s.shape, s.dtype)}, found "
                                f"{_fmt(e.shape, e.dtype)}")
        if problems:
            shown = problems[:MAX_REPORTED]
            more = f"\n  ... and {len(problems) - MAX_REPORTED} more" if len(problems) > MAX_REPORTED else ""
            raise CheckpointError(f"checkpoint {self.model_dir} does not match the model "
                                  f"({len(problems)} problem(s)):\n  " + "\n  ".join(shown) + more)

    def read(self, name: str) -> torch.Tensor:
        """One tensor as an owning CPU tensor."""
        try:
            entry = self.entries[name]
        except KeyError:
            raise CheckpointError(f"tensor {name} is not in checkpoint {self.model_dir}") from None
        with open(entry.file, "rb") as f:
            return _read_entry(f, entry)

    def iter_tensors(self, names: Iterable[str] | None = None) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, tensor) shard by shard in offset order: sequential reads, one open file per shard."""
        wanted = set(self.entries) if names is None else set(names)
        unknown = wanted - set(self.entries)
        if unknown:
            raise CheckpointError(f"tensor {sorted(unknown)[0]} is not in checkpoint {self.model_dir}")
        for f in self.files:
            in_file = sorted((e for e in self.entries.values() if e.file == f and e.name in wanted),
                             key=lambda e: e.offset)
            if not in_file:
                continue
            logger.debug("reading %d tensors from %s", len(in_file), f.name)
            with open(f, "rb", buffering=0) as fh:
                for entry in in_file:
                    yield entry.name, _read_entry(fh, entry)


def _read_entry(fh, entry: TensorEntry) -> torch.Tensor:
    buf = torch.empty(entry.nbytes, dtype=torch.uint8)
    fh.seek(entry.offset)
    got = fh.readinto(memoryview(buf.numpy()))
    if got != entry.nbytes:
        raise CheckpointError(f"{entry.file}: short read of tensor {entry.name} ({got} of {entry.nbytes} bytes at "
                              f"offset {entry.offset}): the file is truncated or changed")
    return buf.view(entry.dtype).reshape(entry.shape)


def _read_index(index_path: Path) -> dict[str, str]:
    try:
        index = json.loads(index_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{index_path}: not valid JSON ({exc})") from None
    if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
        raise CheckpointError(f"{index_path}: expected an object with a 'weight_map' object (tensor -> shard file)")
    weight_map = index["weight_map"]
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or "/" in shard or shard.startswith("."):
            raise CheckpointError(f"{index_path}: weight_map[{name!r}] = {shard!r}: expected a shard file name")
    return weight_map


def _check_index_against_shards(index_path: Path, weight_map: dict[str, str],
                                entries: Mapping[str, TensorEntry]) -> None:
    for name, shard in sorted(weight_map.items()):
        entry = entries.get(name)
        if entry is None or entry.file.name != shard:
            where = f"it is in {entry.file.name}" if entry else "no shard has it"
            raise CheckpointError(f"{index_path}: tensor {name} is indexed in {shard} but {where}")
    for name in sorted(set(entries) - set(weight_map)):
        raise CheckpointError(f"{index_path}: missing index entry for tensor {name} (present in "
                              f"{entries[name].file.name})")


def _fmt(shape: tuple[int, ...], dtype: torch.dtype) -> str:
    names = {v: k for k, v in DTYPES.items()}
    return f"{names.get(dtype, dtype)} {list(shape)}"

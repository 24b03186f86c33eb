"""Parsing and checking one safetensors file's header; no tensor data is read.

Format: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON mapping each tensor name to
`{"dtype", "shape", "data_offsets": [begin, end]}` (offsets relative to the data section, which starts
at byte 8 + N), plus an optional `"__metadata__"` object of strings. Everything here is checked against
the file size, so a corrupt or truncated file fails at open time with its file and tensor named.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import struct
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import torch

from quickmoe.errors import CheckpointError
from quickmoe.paths import open_regular

logger = logging.getLogger(__name__)

MAX_HEADER_BYTES = 100 * 1024 * 1024
METADATA_KEY = "__metadata__"

DTYPES: dict[str, torch.dtype] = {
    "BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "U16": torch.uint16,
    "I32": torch.int32, "U32": torch.uint32, "I64": torch.int64, "U64": torch.uint64,
    "F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
    "C64": torch.complex64, "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
}
if hasattr(torch, "float8_e8m0fnu"):  # torch >= 2.7
    DTYPES["F8_E8M0"] = torch.float8_e8m0fnu
DTYPE_NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}


def dtype_name(dtype: torch.dtype) -> str:
    """The safetensors name of a torch dtype (e.g. BF16), or torch's own name if it has none."""
    return DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


class TensorEntry(NamedTuple):
    """Where one checkpoint tensor lives: its file, absolute byte offset and byte length, dtype, shape. (A
    NamedTuple, like the loader's other per-tensor records: a checkpoint may hold 74,000 tensors, and a frozen
    dataclass takes 2-3x as long to construct.)"""

    name: str
    file: Path
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int  # absolute byte offset in `file`
    nbytes: int

    @property
    def end(self) -> int:
        """Absolute offset one past the tensor's last byte."""
        return self.offset + self.nbytes


@dataclass(frozen=True)
class ShardHeader:
    """One parsed safetensors file: its size, where the data starts, metadata, tensors in offset order, and the
    sha256 (hex) of its header's bytes (what keys the caches derived from the header: `header_cache`, `load_plan`)."""

    file: Path
    file_size: int
    data_start: int
    metadata: MappingProxyType[str, str]
    entries: tuple[TensorEntry, ...]
    header_sha256: str = ""


def parse_header(path: Path) -> ShardHeader:
    """Parse and check the header of the safetensors file `path` against the file's size."""
    raw, size = read_header_bytes(path)
    return parse_header_bytes(path, raw, size)


def read_header_bytes(path: Path) -> tuple[bytes, int]:
    """The JSON header's bytes of the safetensors file `path` (checked for length only) and the file's size."""
    try:
        with os.fdopen(open_regular(path), "rb", buffering=0) as f:
            size = f.seek(0, 2)
            if size < 8:
                raise CheckpointError(f"{path}: corrupt safetensors file: {size} bytes, expected at least 8 "
                                      "(the header length)")
            f.seek(0)
            (header_len,) = struct.unpack("<Q", _read_exact(f, 8))
            if header_len > MAX_HEADER_BYTES:
                raise CheckpointError(f"{path}: corrupt safetensors header: header length {header_len} bytes is "
                                      f"absurd (expected at most {MAX_HEADER_BYTES})")
            if 8 + header_len > size:
                raise CheckpointError(f"{path}: corrupt safetensors header: header length {header_len} bytes is "
                                      f"larger than the file allows (file is {size} bytes, so at most {size - 8})")
            raw = _read_exact(f, header_len)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read safetensors file ({exc})") from None
    if len(raw) != header_len:
        raise CheckpointError(f"{path}: short read of the header ({len(raw)} of {header_len} bytes)")
    return raw, size


def parse_header_bytes(path: Path, raw: bytes, size: int, digest: str | None = None) -> ShardHeader:
    """`parse_header` of header bytes `raw` read from `path`, a file of `size` bytes (`digest`: their sha256, if the
    caller has it)."""
    header_len = len(raw)
    header = _decode_json(path, raw)
    data_start = 8 + header_len
    metadata = _metadata(path, header.pop(METADATA_KEY, None))
    try:
        entries = sorted((_entry(path, name, info, data_start) for name, info in header.items()),
                         key=attrgetter("offset", "nbytes"))
    except CheckpointError:
        _decode_json(path, raw, strict=True)  # a key seen twice explains a bad entry better: raised first
        raise
    _check_overlaps(path, entries)
    _check_truncation(path, entries, size)
    logger.debug("%s: %d tensors, header %d bytes, data %d bytes", path, len(entries), header_len,
                 size - data_start)
    return ShardHeader(path, size, data_start, MappingProxyType(metadata), tuple(entries),
                       digest or hashlib.sha256(raw).hexdigest())


def _read_exact(f: Any, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = f.read(n - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _decode_json(path: Path, raw: bytes, strict: bool = False) -> dict[str, Any]:
    """The header's JSON object; a key seen twice anywhere is an error (`strict`: looked for in every case)."""
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise CheckpointError(f"{path}: corrupt safetensors header: key {key!r} appears twice")
            out[key] = value
        return out

    try:
        text = raw.decode("utf-8")
        header = json.loads(text)  # the C parser; keys seen twice are looked for below, in the bytes
        if strict or (isinstance(header, dict) and _may_repeat_keys(raw, header)):
            header = json.loads(text, object_pairs_hook=no_duplicates)  # 10x slower: raises on a repeated key
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path}: corrupt safetensors header: not UTF-8 ({exc})") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: corrupt safetensors header: not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt safetensors header: expected a JSON object, found "
                              f"{type(header).__name__}")
    return header


def _may_repeat_keys(raw: bytes, header: dict[str, Any]) -> bool:
    """False when no key can appear twice: every entry holds each of "dtype", "shape" and "data_offsets" once, so
    with no key repeated each of those strings occurs once per parsed entry (a repeated tensor name leaves one
    entry fewer, a repeated field one occurrence more), and "__metadata__" at most once. Anything else (such a
    string inside a name or the metadata, an escaped key) answers True: the slow parse decides."""
    entries = len(header) - (METADATA_KEY in header)
    return (raw.count(b'"__metadata__"') > 1
            or any(raw.count(key) != entries for key in (b'"data_offsets"', b'"dtype"', b'"shape"')))


def _metadata(path: Path, meta: Any) -> dict[str, str]:
    if meta is None:
        return {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"{path}: corrupt safetensors header: {METADATA_KEY} must be an object of strings, "
                              f"found {_short(meta)}")
    return meta


def _is_uint(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _entry(path: Path, name: str, info: Any, data_start: int) -> TensorEntry:
    """The entry of tensor `name`: a fast path for a well-formed one (a checkpoint may hold ~40,000), else
    `_checked_entry`, which names what is wrong."""
    try:
        dtype = DTYPES[info["dtype"]]
        shape = info["shape"]
        begin, end = info["data_offsets"]
    except (KeyError, TypeError, ValueError):
        return _checked_entry(path, name, info, data_start)
    if (type(shape) is list and type(begin) is int and type(end) is int and 0 <= begin <= end
            and all(type(d) is int and d >= 0 for d in shape)):
        nbytes = math.prod(shape) * dtype.itemsize
        if end - begin == nbytes:
            return TensorEntry(name, path, dtype, tuple(shape), data_start + begin, nbytes)
    return _checked_entry(path, name, info, data_start)


def _checked_entry(path: Path, name: str, info: Any, data_start: int) -> TensorEntry:
    where = f"{path}: tensor {name}"
    if not isinstance(info, dict):
        raise CheckpointError(f"{where}: header entry must be an object with dtype, shape and data_offsets, "
                              f"found {_short(info)}")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in info]
    if missing:
        raise CheckpointError(f"{where}: header entry lacks {', '.join(missing)} (expected dtype, shape and "
                              f"data_offsets, found {_short(info)})")
    dtype_str, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    dtype = DTYPES.get(dtype_str) if isinstance(dtype_str, str) else None
    if dtype is None:
        raise CheckpointError(f"{where}: unknown dtype {_short(dtype_str)} (expected one of "
                              f"{', '.join(sorted(DTYPES))})")
    if not isinstance(shape, list) or not all(_is_uint(d) for d in shape):
        raise CheckpointError(f"{where}: shape {_short(shape)} is not a list of non-negative integers")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_uint(o) for o in offsets):
        raise CheckpointError(f"{where}: data_offsets {_short(offsets)} is not [begin, end] of non-negative "
                              "integers")
    begin, end = offsets
    expected = math.prod(shape) * dtype.itemsize
    if end < begin or end - begin != expected:
        raise CheckpointError(f"{where}: data_offsets [{begin}, {end}] span {end - begin} bytes, but {dtype_str} "
                              f"{shape} needs {expected} bytes")
    return TensorEntry(name, path, dtype, tuple(shape), data_start + begin, expected)


def _check_overlaps(path: Path, entries: list[TensorEntry]) -> None:
    last: TensorEntry | None = None  # the entry reaching furthest so far
    for e in entries:
        if e.nbytes == 0:
            continue
        if last is not None and e.offset < last.end:
            raise CheckpointError(f"{path}: tensors {last.name} (bytes {last.offset}..{last.end}) and {e.name} "
                                  f"(bytes {e.offset}..{e.end}) overlap in the data section")
        if last is None or e.end > last.end:
            last = e


def _check_truncation(path: Path, entries: list[TensorEntry], size: int) -> None:
    cut = [e for e in entries if e.end > size]
    if cut:
        needed = max(e.end for e in entries)
        first = cut[0]
        raise CheckpointError(f"{path}: truncated shard: tensor {first.name} needs bytes {first.offset}..{first.end} "
                              f"but the file ends at {size}; expected file size {needed} bytes, found {size} "
                              f"({len(cut)} tensor(s) cut off)")


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."

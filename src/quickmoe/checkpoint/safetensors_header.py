"""Parsing and checking one safetensors file's header (no data is read)."""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

import torch

from quickmoe.errors import CheckpointError

MAX_HEADER_BYTES = 100 * 1024 * 1024

DTYPES: dict[str, torch.dtype] = {
    "BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64,
    "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "I32": torch.int32, "I64": torch.int64,
    "BOOL": torch.bool, "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
}


@dataclass(frozen=True)
class HeaderEntry:
    """A tensor as its shard header describes it; offset is absolute in the file."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int
    nbytes: int


def parse_header(path: Path) -> list[HeaderEntry]:
    """Parse and check the header of `path` against the file size; entries sorted by offset."""
    size = path.stat().st_size
    if size < 8:
        raise CheckpointError(f"{path}: corrupt safetensors file ({size} bytes, shorter than the 8-byte header "
                              "length)")
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        if header_len > MAX_HEADER_BYTES or 8 + header_len > size:
            raise CheckpointError(f"{path}: corrupt safetensors header length {header_len} (file is {size} bytes; "
                                  f"expected at most {min(MAX_HEADER_BYTES, size - 8)})")
        raw = f.read(header_len)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: corrupt safetensors header (not UTF-8 JSON: {exc})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt safetensors header (expected a JSON object)")
    data_start = 8 + header_len
    entries = [_entry(path, name, info, data_start) for name, info in header.items() if name != "__metadata__"]
    entries.sort(key=lambda e: e.offset)
    for prev, cur in zip(entries, entries[1:]):
        if cur.offset < prev.offset + prev.nbytes:
            raise CheckpointError(f"{path}: tensors {prev.name} and {cur.name} overlap in the data section")
    for e in entries:
        if e.offset + e.nbytes > size:
            raise CheckpointError(f"{path}: truncated: tensor {e.name} ends at byte {e.offset + e.nbytes} but the "
                                  f"file has {size} bytes (expected at least {e.offset + e.nbytes})")
    return entries


def _entry(path: Path, name: str, info: object, data_start: int) -> HeaderEntry:
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
        raise CheckpointError(f"{path}: tensor {name}: header entry {info!r} needs dtype, shape and data_offsets")
    dtype = DTYPES.get(info["dtype"])
    if dtype is None:
        raise CheckpointError(f"{path}: tensor {name}: unknown dtype {info['dtype']!r} (expected one of "
                              f"{sorted(DTYPES)})")
    shape, offsets = info["shape"], info["data_offsets"]
    if not isinstance(shape, list) or any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in shape):
        raise CheckpointError(f"{path}: tensor {name}: shape {shape!r} is not a list of non-negative integers")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or any(not isinstance(o, int) or isinstance(o, bool) or o < 0 for o in offsets)):
        raise CheckpointError(f"{path}: tensor {name}: data_offsets {offsets!r} is not [begin, end]")
    begin, end = offsets
    itemsize = torch.empty((), dtype=dtype).element_size()
    expected = math.prod(shape) * itemsize
    if end - begin != expected:
        raise CheckpointError(f"{path}: tensor {name}: data_offsets {offsets} span {end - begin} bytes but "
                              f"{info['dtype']} {shape} needs {expected}")
    return HeaderEntry(name, dtype, tuple(shape), data_start + begin, expected)

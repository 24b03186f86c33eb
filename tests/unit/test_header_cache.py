"""The parsed-header cache (`checkpoint/header_cache.py`) against a fresh parse of the same file (safetensors'
own writer, random shapes and dtypes, metadata): a second start reads the cache and parses no JSON; a moved file
hits with its new path; a truncated shard still fails; a malformed cache file is a miss and is rewritten; small
headers and QUICKMOE_HEADER_CACHE=0 write nothing."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from quickmoe.checkpoint import header_cache, safetensors_header
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.errors import CheckpointError

DTYPES = [torch.bfloat16, torch.float32, torch.uint8, torch.float8_e4m3fn, torch.int64]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("QUICKMOE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("QUICKMOE_HEADER_CACHE", raising=False)
    monkeypatch.setattr(header_cache, "MIN_HEADER_BYTES", 2000)  # 10 tensors' header under it, 40 tensors' over
    return tmp_path / "cache" / "safetensors-headers"


def _checkpoint(folder: Path, n: int, seed: int) -> Path:
    rng = random.Random(seed)
    tensors = {f"model.layers.{i}.mlp.experts.{rng.randrange(128)}.w{i % 3}": torch.zeros(
        [rng.randint(0, 5) for _ in range(rng.randint(0, 3))], dtype=rng.choice(DTYPES)) for i in range(n)}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt", "seed": str(seed)})
    return folder / "model.safetensors"


def _fields(header):
    return ([(e.name, e.file, e.dtype, e.shape, e.offset, e.nbytes) for e in header.entries], dict(header.metadata),
            header.file, header.file_size, header.data_start)


def test_a_second_parse_reads_the_cache_and_equals_a_fresh_parse(cache, monkeypatch):
    path = _checkpoint(Path(cache).parent.parent / "ckpt", 60, seed=1)
    fresh = safetensors_header.parse_header(path)
    first = header_cache.parse_header_cached(path)
    assert _fields(first) == _fields(fresh) and len(list(cache.rglob("*.marshal"))) == 1
    monkeypatch.setattr(safetensors_header, "_decode_json", lambda *a, **k: pytest.fail("parsed the JSON again"))
    second = header_cache.parse_header_cached(path)
    assert _fields(second) == _fields(fresh)
    assert CheckpointReader(path.parent).entries == {e.name: e for e in fresh.entries}


def test_a_moved_checkpoint_hits_with_its_new_path(cache, monkeypatch):
    path = _checkpoint(Path(cache).parent.parent / "a", 40, seed=2)
    header_cache.parse_header_cached(path)
    moved = Path(cache).parent.parent / "b" / "model.safetensors"
    moved.parent.mkdir()
    shutil.move(path, moved)
    monkeypatch.setattr(safetensors_header, "_decode_json", lambda *a, **k: pytest.fail("parsed the JSON again"))
    header = header_cache.parse_header_cached(moved)
    assert header.file == moved and all(e.file == moved for e in header.entries)


def test_a_truncated_shard_fails_even_with_its_header_cached(cache):
    path = _checkpoint(Path(cache).parent.parent / "ckpt", 40, seed=3)
    header = header_cache.parse_header_cached(path)
    last = max(header.entries, key=lambda e: e.offset + e.nbytes)
    assert last.nbytes > 0
    with open(path, "r+b") as f:
        f.truncate(last.offset + last.nbytes - 1)
    with pytest.raises(CheckpointError, match="truncated shard"):
        header_cache.parse_header_cached(path)


def test_a_malformed_cache_file_is_a_miss_and_is_rewritten(cache):
    path = _checkpoint(Path(cache).parent.parent / "ckpt", 40, seed=4)
    want = _fields(header_cache.parse_header_cached(path))
    (file,) = cache.rglob("*.marshal")
    for garbage in (b"", b"\x00\x01not marshal", __import__("marshal").dumps((1, {}, 0))):
        file.write_bytes(garbage)
        assert _fields(header_cache.parse_header_cached(path)) == want
        assert file.read_bytes() != garbage  # parsed, and the entry written again


def test_small_headers_and_the_switch_write_nothing(cache, monkeypatch):
    small = _checkpoint(Path(cache).parent.parent / "small", 10, seed=5)
    assert len(safetensors_header.read_header_bytes(small)[0]) < header_cache.MIN_HEADER_BYTES
    header_cache.parse_header_cached(small)
    assert not list(cache.rglob("*.marshal"))
    monkeypatch.setenv("QUICKMOE_HEADER_CACHE", "0")
    large = _checkpoint(Path(cache).parent.parent / "large", 40, seed=6)
    assert len(safetensors_header.read_header_bytes(large)[0]) >= header_cache.MIN_HEADER_BYTES
    assert _fields(header_cache.parse_header_cached(large)) == _fields(safetensors_header.parse_header(large))
    assert not list(cache.rglob("*.marshal"))


def test_no_cache_directory_means_parsing_every_time(cache, monkeypatch):
    """A cache directory that cannot be made (a read-only home) costs the cache, not the start."""
    path = _checkpoint(Path(cache).parent.parent / "ckpt", 40, seed=7)

    def refuse():
        raise PermissionError(13, "read-only file system")

    monkeypatch.setattr(header_cache, "cache_dir", refuse)
    assert _fields(header_cache.parse_header_cached(path)) == _fields(safetensors_header.parse_header(path))

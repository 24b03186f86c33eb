"""The streaming loader: chunk planning, bit-exact equality with a naive per-tensor load for many chunk sizes
(tensors straddling and exceeding chunks), thread counts and ring sizes, bounded host buffers, errors
(short reads, failing or aliasing weight loaders) that stop the reader threads, progress, given host rings."""

from __future__ import annotations

import io
import json
import os
import struct
import threading
from pathlib import Path

import pytest
import torch
from torch import nn

from quickmoe.checkpoint.chunk_plan import plan_chunks
from quickmoe.checkpoint.loader import DEFAULT_CHUNK_BYTES, LoadStats, load_weights
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.config import ModelConfig
from quickmoe.errors import CheckpointError
from quickmoe.layers.weights import declare_weight
from quickmoe.models.registry import build_model

SMALL = dict(vocab_size=1024, eos_token_id=1022, pad_token_id=1023, hidden_size=64, intermediate_size=64)

# (chunk_bytes, num_threads, num_buffers): 4 KiB chunks make most tensors straddle or exceed a chunk; an
# odd size misaligns every view (the assembly fallback); one buffer serialises readers and consumer.
CONFIGS = [(4096, 1, 1), (4096, 4, 3), (4097, 2, 2), (65536, 3, 8), (1 << 20, 4, 8), (DEFAULT_CHUNK_BYTES, 4, 8)]


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    """Small random checkpoints (MXFP4 and bf16 experts), each in several shards."""
    from quickmoe.checkpoint.synth import write_checkpoint

    root = tmp_path_factory.mktemp("loader")
    return {dt: write_checkpoint(root / dt, preset="tiny", layers=2, experts=4, seed=3, experts_dtype=dt,
                                 overrides=SMALL, shard_bytes=300_000, progress=False)
            for dt in ("mxfp4", "bf16")}


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def build(model_dir: Path, dtype: torch.dtype = torch.float32, device: str = "cpu") -> nn.Module:
    return build_model(ModelConfig.from_dir(model_dir), dtype=dtype, device=device)


def naive_load(model: nn.Module, reader: CheckpointReader) -> None:
    """The reference: each tensor read on its own into an owning CPU tensor, then its weight_loader."""
    for name, param in model.named_parameters():
        param.weight_loader(param, reader.read(name).to(param.device))


def assert_models_equal(got: nn.Module, want: nn.Module) -> None:
    want_params = dict(want.named_parameters())
    for name, p in got.named_parameters():
        q = want_params[name]
        assert p.dtype == q.dtype and p.shape == q.shape, name
        assert torch.equal(bits(p.cpu()), bits(q.cpu())), name


def reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("quickmoe-read")]


# -- planning -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_bytes", [1, 7, 4096, 4097, 1 << 20])
def test_plan_covers_every_byte_once_in_file_order(ckpts, chunk_bytes):
    reader = CheckpointReader(ckpts["mxfp4"])
    assert len(reader.files) > 1
    chunks = plan_chunks(reader.entries_by_file, chunk_bytes)
    covered: dict[str, list[tuple[int, int]]] = {}
    order = []
    for i, c in enumerate(chunks):
        assert c.index == i and 0 < c.nbytes <= chunk_bytes
        assert c.pieces[0].src == 0 and max(p.src + p.nbytes for p in c.pieces) == c.nbytes
        order.append((reader.files.index(c.file), c.offset))
        for p in c.pieces:
            assert p.entry.file == c.file and c.offset + p.src == p.entry.offset + p.dst
            covered.setdefault(p.entry.name, []).append((p.dst, p.nbytes))
    assert order == sorted(order)
    for name, entry in reader.entries.items():
        spans = covered[name]
        assert spans[0][0] == 0 and sum(n for _, n in spans) == entry.nbytes
        assert all(a + n == b for (a, n), (b, _) in zip(spans, spans[1:])), name  # in order, no gap


def test_plan_reads_contiguous_data_without_gaps(ckpts):
    reader = CheckpointReader(ckpts["bf16"])
    chunks = plan_chunks(reader.entries_by_file, 4096)
    for a, b in zip(chunks, chunks[1:]):
        if a.file == b.file:
            assert b.offset == a.offset + a.nbytes and a.nbytes == 4096  # synth packs tensors back to back


# -- equality with the naive path -----------------------------------------------------------------------


@pytest.mark.parametrize("experts_dtype", ["mxfp4", "bf16"])
@pytest.mark.parametrize("chunk_bytes,num_threads,num_buffers", CONFIGS)
def test_streamed_load_is_bit_identical_to_naive(ckpts, experts_dtype, chunk_bytes, num_threads, num_buffers):
    model_dir = ckpts[experts_dtype]
    reader = CheckpointReader(model_dir)
    want = build(model_dir)
    naive_load(want, reader)
    got = build(model_dir)
    stats = load_weights(got, reader, chunk_bytes=chunk_bytes, num_threads=num_threads, num_buffers=num_buffers)
    assert_models_equal(got, want)
    assert stats.num_tensors == len(reader.entries) and stats.num_bytes == reader.total_bytes
    largest = max(e.nbytes for e in reader.entries.values())
    assert stats.num_chunks >= reader.total_bytes // chunk_bytes
    assert 0 < stats.peak_host_buffer_bytes <= num_buffers * chunk_bytes + largest
    assert stats.peak_device_buffer_bytes == 0 and stats.gb_per_s > 0
    assert not reader_threads()


def test_bf16_params_convert_identically(ckpts):
    """Conversions inside weight loaders (here to bf16 storage, and the experts' transpose) see the same bytes."""
    model_dir = ckpts["bf16"]
    reader = CheckpointReader(model_dir)
    want = build(model_dir, torch.bfloat16)
    naive_load(want, reader)
    got = build(model_dir, torch.bfloat16)
    load_weights(got, reader, chunk_bytes=4096, num_threads=3, num_buffers=4)
    assert_models_equal(got, want)


def test_host_buffers_stay_bounded_by_the_ring(ckpts):
    reader = CheckpointReader(ckpts["mxfp4"])
    stats = load_weights(build(ckpts["mxfp4"]), reader, chunk_bytes=4096, num_buffers=3, num_threads=2)
    largest = max(e.nbytes for e in reader.entries.values())  # at most one tensor is assembled at a time
    assert reader.total_bytes > 2 * (3 * 4096 + largest)  # the bound means something
    assert stats.peak_host_buffer_bytes <= 3 * 4096 + largest
    assert stats.num_buffers == 3 and stats.num_threads == 2


class _Odd(nn.Module):
    """Tensors of several dtypes, one empty and one scalar, at offsets that misalign them."""

    SPECS = {"a": ((3,), torch.uint8), "b": ((5, 3), torch.bfloat16), "empty": ((0, 4), torch.float32),
             "c": ((7,), torch.float32), "s": ((), torch.float64), "d": ((2, 3), torch.int64)}

    def __init__(self, device: str = "cpu") -> None:
        super().__init__()
        for name, (shape, dtype) in self.SPECS.items():
            declare_weight(self, name, shape, dtype, device, checkpoint_dtype=dtype)


def _write_raw_safetensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """A safetensors file with tensors packed in the given order, unaligned (the format allows it)."""
    names = {torch.uint8: "U8", torch.bfloat16: "BF16", torch.float32: "F32", torch.float64: "F64",
             torch.int64: "I64"}
    header, data, off = {}, bytearray(), 0
    for name, t in tensors.items():
        raw = bits(t).numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    blob = json.dumps(header).encode()
    blob += b" " * (-(len(blob) + 8) % 8 + 3)  # data section starts at an odd offset in the file
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + bytes(data))


@pytest.mark.parametrize("chunk_bytes", [1, 2, 3, 8, 13, 64, 4096])
def test_unaligned_empty_and_scalar_tensors(tmp_path, chunk_bytes):
    g = torch.Generator().manual_seed(0)
    tensors = {name: torch.randint(0, 256, (max(1, torch.Size(shape).numel()) * dtype.itemsize,), generator=g,
                                   dtype=torch.uint8)[:torch.Size(shape).numel() * dtype.itemsize]
               .view(dtype).reshape(shape) for name, (shape, dtype) in _Odd.SPECS.items()}
    _write_raw_safetensors(tmp_path / "model.safetensors", tensors)
    model = _Odd()
    stats = load_weights(model, CheckpointReader(tmp_path), chunk_bytes=chunk_bytes, num_threads=2, num_buffers=2)
    for name, t in tensors.items():
        assert torch.equal(bits(getattr(model, name)), bits(t)), name
    assert stats.num_tensors == len(tensors)


# -- errors ---------------------------------------------------------------------------------------------


def test_validation_runs_before_any_read(ckpts, monkeypatch):
    import quickmoe.checkpoint.loader as loader_mod

    model = build(ckpts["mxfp4"])
    reader = CheckpointReader(ckpts["bf16"])  # experts of another dtype and shape
    monkeypatch.setattr(loader_mod, "ChunkRing", None)  # any read would fail with a TypeError
    with pytest.raises(CheckpointError, match="gate_up_proj"):
        load_weights(model, reader)


def test_file_truncated_after_opening_is_named(ckpts, tmp_path):
    import shutil

    d = tmp_path / "copy"
    shutil.copytree(ckpts["mxfp4"], d)
    reader = CheckpointReader(d)  # headers checked against the full files
    last = reader.files[-1]
    os.truncate(last, last.stat().st_size - 100)
    with pytest.raises(CheckpointError, match=rf"{last.name}: short read"):
        load_weights(build(d), reader, chunk_bytes=4096)
    assert not reader_threads()


def test_failing_weight_loader_stops_the_readers(ckpts):
    model = build(ckpts["mxfp4"])
    name = "model.layers.1.mlp.router.weight"
    param = dict(model.named_parameters())[name]

    def bad(p: nn.Parameter, t: torch.Tensor) -> None:
        raise RuntimeError("boom")

    param.weight_loader = bad
    with pytest.raises(RuntimeError, match="boom"):
        load_weights(model, CheckpointReader(ckpts["mxfp4"]), chunk_bytes=4096, num_threads=4, num_buffers=2)
    assert not reader_threads()


def test_aliasing_weight_loader_is_refused(ckpts):
    model = build(ckpts["bf16"], torch.bfloat16)
    param = model.model.norm.weight if hasattr(model, "model") else None
    assert param is not None

    def alias(p: nn.Parameter, t: torch.Tensor) -> None:
        p.data = t

    param.weight_loader = alias
    with pytest.raises(AssertionError, match="model.norm.weight"):
        load_weights(model, CheckpointReader(ckpts["bf16"]))


def test_bad_options_are_refused(ckpts):
    with pytest.raises(ValueError, match="chunk_bytes"):
        load_weights(build(ckpts["mxfp4"]), CheckpointReader(ckpts["mxfp4"]), chunk_bytes=0)


# -- progress and prefetch ------------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_on_a_terminal_only(ckpts, monkeypatch):
    import sys

    reader = CheckpointReader(ckpts["mxfp4"])
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    load_weights(build(ckpts["mxfp4"]), reader, progress=True, chunk_bytes=65536)
    assert "loading weights" in tty.getvalue() and "B/s" in tty.getvalue()
    tty2 = _Tty()
    monkeypatch.setattr(sys, "stderr", tty2)
    load_weights(build(ckpts["mxfp4"]), reader, progress=False)
    assert tty2.getvalue() == ""


def test_given_host_buffers_are_the_ring(ckpts):
    """Buffers allocated beforehand (the early start's page-locked ring) are used as the ring, one slot each."""
    reader = CheckpointReader(ckpts["mxfp4"])
    want = build(ckpts["mxfp4"])
    naive_load(want, reader)
    buffers = [torch.empty(70_000, dtype=torch.uint8) for _ in range(3)]
    got = build(ckpts["mxfp4"])
    stats = load_weights(got, reader, chunk_bytes=65536, num_threads=2, host_buffers=buffers)
    assert_models_equal(got, want)
    assert stats.num_buffers == 3 and 3 * 70_000 <= stats.peak_host_buffer_bytes <= 3 * 70_000 + _largest_assembled(reader, 65536)
    with pytest.raises(ValueError, match="at least one 1-D uint8 buffer of >= 65536 bytes"):
        load_weights(build(ckpts["mxfp4"]), reader, chunk_bytes=65536, host_buffers=[torch.empty(4096, dtype=torch.uint8)])
    assert not reader_threads()


def _largest_assembled(reader: CheckpointReader, chunk_bytes: int) -> int:
    """Bytes of the CPU assembly buffer: the largest tensor that is not handed on as one view of a chunk."""
    chunks = plan_chunks(reader.entries_by_file, chunk_bytes, list(reader.entries))
    return max((p.entry.nbytes for c in chunks for p in c.pieces
                if not (p.is_whole and p.src % p.entry.dtype.itemsize == 0)), default=0)


def test_stats_keep_existing_fields():
    s = LoadStats(num_tensors=1, num_bytes=2_000_000_000, seconds=2.0)
    assert s.gb_per_s == pytest.approx(1.0)


# -- GPU ------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("experts_dtype", ["mxfp4", "bf16"])
@pytest.mark.parametrize("chunk_bytes,num_threads,num_buffers,num_device_buffers",
                         [(4096, 1, 1, 1), (4096, 4, 3, 2), (4097, 2, 2, 3), (1 << 20, 4, 8, 2),
                          (DEFAULT_CHUNK_BYTES, 4, 8, 2)])
@pytest.mark.parametrize("batched", [True, False])
def test_cuda_load_is_bit_identical_to_naive(ckpts, experts_dtype, chunk_bytes, num_threads, num_buffers,
                                             num_device_buffers, batched, monkeypatch):
    """Chunks of one tensor piece to many; each chunk's direct copies in batched driver calls (where the driver has
    them: CUDA 13.0) or one call each (QUICKMOE_BATCHED_COPIES=0)."""
    monkeypatch.setenv("QUICKMOE_BATCHED_COPIES", "1" if batched else "0")
    model_dir = ckpts[experts_dtype]
    reader = CheckpointReader(model_dir)
    want = build(model_dir, torch.bfloat16, "cuda")
    naive_load(want, reader)
    got = build(model_dir, torch.bfloat16, "cuda")
    from quickmoe.checkpoint.transfer import CudaTransfer

    assert CudaTransfer(torch.device("cuda"), 0, 1)._memcpy is not None  # direct copies go through the driver
    stats = load_weights(got, reader, chunk_bytes=chunk_bytes, num_threads=num_threads, num_buffers=num_buffers,
                         num_device_buffers=num_device_buffers)
    torch.cuda.synchronize()
    assert_models_equal(got, want)
    from quickmoe.checkpoint.batched_memcpy import batch_memcpy

    assert stats.direct_copies > 0
    if batched and batch_memcpy() is not None and chunk_bytes >= 1 << 20:  # chunks of many pieces: batched
        assert stats.copy_calls < stats.direct_copies, stats
    elif not batched:
        assert stats.copy_calls == stats.direct_copies
    largest = max(e.nbytes for e in reader.entries.values())
    assert 0 < stats.peak_host_buffer_bytes <= num_buffers * chunk_bytes
    assert 0 < stats.peak_device_buffer_bytes <= num_device_buffers * chunk_bytes + largest
    assert not reader_threads()


@pytest.mark.gpu
def test_cuda_unaligned_tensors(tmp_path):
    g = torch.Generator().manual_seed(1)
    tensors = {name: torch.randint(0, 256, (torch.Size(shape).numel() * dtype.itemsize,), generator=g,
                                   dtype=torch.uint8).view(dtype).reshape(shape)
               for name, (shape, dtype) in _Odd.SPECS.items()}
    _write_raw_safetensors(tmp_path / "model.safetensors", tensors)
    model = _Odd("cuda")
    load_weights(model, CheckpointReader(tmp_path), chunk_bytes=5, num_threads=2, num_buffers=2)
    torch.cuda.synchronize()
    for name, t in tensors.items():
        assert torch.equal(bits(getattr(model, name).cpu()), bits(t)), name

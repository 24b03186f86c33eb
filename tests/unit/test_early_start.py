"""The early start: the page-cache prefetch (reads what is not cached, skips what is), the CUDA
pre-initialisation (fails quietly without a driver; on a GPU its page-locked ring feeds the loader), and
that neither imports torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from quickmoe.checkpoint.prefetch import PageCachePrefetch, prefetch_page_cache
from quickmoe.errors import ConfigError
from quickmoe.startup.cuda_preinit import CudaPreinit
from quickmoe.startup.early_start import EarlyStart, cuda_ordinal

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _write(path: Path, nbytes: int) -> Path:
    path.write_bytes(os.urandom(nbytes))
    with open(path, "rb+") as f:
        os.fsync(f.fileno())
    return path


def _evict(path: Path) -> bool:
    """Drop the file's clean pages from the page cache (no root needed); True if its first page is gone."""
    if not hasattr(os, "posix_fadvise") or not hasattr(os, "RWF_NOWAIT"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        try:
            os.preadv(fd, [bytearray(1)], 0, os.RWF_NOWAIT)
        except BlockingIOError:
            return True
        return False
    finally:
        os.close(fd)


def test_prefetch_reads_what_is_not_cached_and_skips_what_is(tmp_path):
    files = [_write(tmp_path / f"model-{i}.safetensors", n) for i, n in enumerate((3 << 20, (5 << 20) + 123))]
    total = sum(f.stat().st_size for f in files)
    if not all(_evict(f) for f in files):
        pytest.skip("this file system keeps the files cached (or lacks RWF_NOWAIT): residency is not observable")
    cold = PageCachePrefetch(files, num_threads=3, window_bytes=1 << 20, read_bytes=300_000, readahead=False).start()
    assert cold.join(timeout=60)
    # The kernel's own read-ahead may bring a later window in before its turn (then counted as cached)
    stats = cold.stats()
    assert stats.read_bytes + stats.resident_bytes == total and stats.read_bytes >= 2 << 20
    warm = prefetch_page_cache(files)
    assert warm.join(timeout=60)
    assert warm.stats().resident_bytes == total and warm.stats().read_bytes == 0


def test_prefetch_of_a_missing_file_warns_and_goes_on(tmp_path, caplog):
    good = _write(tmp_path / "a.safetensors", 10_000)
    with caplog.at_level("WARNING"):
        p = PageCachePrefetch([tmp_path / "missing.safetensors", good]).start()
        assert p.join(timeout=60)
    stats = p.stats()
    assert stats.failed_files == 1 and stats.read_bytes + stats.resident_bytes == 10_000
    assert "missing.safetensors" in caplog.text


def test_prefetch_stop_takes_no_further_window(tmp_path, monkeypatch):
    """stop() while the only thread is inside its first window: that window finishes, no other starts."""
    import threading

    from quickmoe.checkpoint import prefetch as pf

    files = [_write(tmp_path / "big.safetensors", 8 << 20)]
    entered, release = threading.Event(), threading.Event()

    def blocking_probe(fd, offset, nbytes):
        entered.set()
        release.wait(timeout=60)
        return True  # counted as already cached

    monkeypatch.setattr(pf, "_is_resident", blocking_probe)
    p = PageCachePrefetch(files, num_threads=1, window_bytes=1 << 20).start()
    assert entered.wait(timeout=60)
    stopper = threading.Thread(target=p.stop)
    stopper.start()
    release.set()
    stopper.join(timeout=60)
    assert not stopper.is_alive() and p.join(timeout=0)
    assert p.stats().resident_bytes == 1 << 20 and p.stats().read_bytes == 0  # one window of eight


def test_options_are_validated():
    with pytest.raises(ValueError, match="'num_threads' = 0"):
        PageCachePrefetch([], num_threads=0)
    with pytest.raises(ValueError, match="'ordinal' = -1"):
        CudaPreinit(-1, num_buffers=1, buffer_bytes=1)
    with pytest.raises(ValueError, match="'buffer_bytes' = 'x'"):
        CudaPreinit(0, num_buffers=1, buffer_bytes="x")
    assert [cuda_ordinal(d) for d in ("auto", "cuda", "cuda:3", "cpu")] == [0, 0, 3, None]


def _pythonpath() -> str:
    """The source tree first, then the caller's path (the GPU machine's wheels live there)."""
    return os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)


def test_early_start_imports_no_torch(tmp_path):
    """It runs before `import torch`, so it must not import it (nor anything that does)."""
    code = ("import sys; from quickmoe.startup.early_start import EarlyStart; "
            f"e = EarlyStart.begin({str(tmp_path)!r}, 'cpu'); e.finish(); tok = e.tokenizer.result(); "
            "assert tok.encode('Hello world') == [13225, 2375], tok.encode('Hello world'); "
            "assert 'torch' not in sys.modules, 'torch was imported'; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": _pythonpath()})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_early_start_switches(tmp_path, monkeypatch):
    _write(tmp_path / "model.safetensors", 4096)
    early = EarlyStart.begin(tmp_path, "cpu")
    assert early.cuda is None and early.prefetch is not None
    assert early.prefetch.join(timeout=60)  # (finish() stops it: joined first, or it may have read nothing yet)
    early.finish()
    assert early.info()["prefetch"]["read_bytes"] + early.info()["prefetch"]["resident_bytes"] == 4096
    monkeypatch.setenv("QUICKMOE_PREFETCH", "0")
    monkeypatch.setenv("QUICKMOE_CUDA_PREINIT", "0")
    early = EarlyStart.begin(tmp_path, "cuda:0")
    assert early.prefetch is None and early.cuda is None
    assert early.tokenizer is not None  # the tokenizer loads on its thread whatever the other switches
    early.tokenizer.result(timeout=60)
    assert set(early.info()) == {"tokenizer"}  # (a timing from the tokenizer's thread, nothing else)
    monkeypatch.setenv("QUICKMOE_EARLY_TOKENIZER", "0")
    assert EarlyStart.begin(tmp_path, "cpu").tokenizer is None  # left to the engine (llm.py starts it itself)


def test_cuda_preinit_context_only_and_a_bad_switch(tmp_path, monkeypatch):
    """QUICKMOE_CUDA_PREINIT=context: the context only, no page-locked ring (the loader pins its own after the
    imports); a value other than 0, 1 or context is an error naming the variable."""
    monkeypatch.setenv("QUICKMOE_CUDA_PREINIT", "context")
    early = EarlyStart.begin(tmp_path, "cuda:0")
    assert early.cuda is not None and early.cuda.num_buffers == 0
    early.cuda.wait(timeout=120)
    assert early.cuda.buffers == [] and early.info()["cuda_preinit"]["host_buffer_bytes"] == 0
    early.finish()
    monkeypatch.setenv("QUICKMOE_CUDA_PREINIT", "ring")
    with pytest.raises(ConfigError, match=r"QUICKMOE_CUDA_PREINIT = 'ring': expected one of \['0', '1', 'context'\]"):
        EarlyStart.begin(tmp_path, "cuda:0")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the path without a CUDA driver")
def test_cuda_preinit_without_a_driver_fails_quietly():
    pre = CudaPreinit(0, num_buffers=2, buffer_bytes=4096).start()
    assert pre.wait(timeout=60) is False
    assert pre.error and ("libcuda" in pre.error or "cuInit" in pre.error)
    assert pre.buffers == [] and pre.host_tensors() == []
    pre.free_buffers()


# -- GPU ------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_cuda_preinit_before_torch_gives_pinned_buffers_torch_can_use():
    """In a fresh process: context and page-locked buffers made through the driver before `import torch`;
    torch then runs on that context and copies random bytes through the buffers asynchronously, exactly."""
    code = """
import sys
from quickmoe.startup.cuda_preinit import CudaPreinit
pre = CudaPreinit(0, num_buffers=2, buffer_bytes=1 << 22).start()
import torch
assert pre.wait(timeout=120), pre.error
torch.cuda.init()
bufs = pre.host_tensors()
assert len(bufs) == 2 and all(b.is_pinned() and b.numel() == 1 << 22 for b in bufs)
src = torch.randint(0, 256, (1 << 22,), dtype=torch.uint8)
dev = torch.empty(2, 1 << 22, dtype=torch.uint8, device="cuda")
for i, b in enumerate(bufs):
    b.copy_(src.roll(i))
    dev[i].copy_(b, non_blocking=True)
torch.cuda.synchronize()
assert all(torch.equal(dev[i].cpu(), src.roll(i)) for i in range(2))
pre.free_buffers()
print("ok", round(pre.context_seconds, 3), round(pre.buffer_seconds, 3))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": _pythonpath()})
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-3000:]


@pytest.mark.gpu
def test_cuda_load_through_the_preinit_ring_is_bit_identical(tmp_path):
    from quickmoe.checkpoint.loader import load_weights
    from quickmoe.checkpoint.reader import CheckpointReader
    from quickmoe.checkpoint.synth import write_checkpoint
    from quickmoe.config import ModelConfig
    from quickmoe.models.registry import build_model

    model_dir = write_checkpoint(tmp_path / "m", preset="tiny", layers=2, experts=4, seed=5, progress=False,
                                 overrides=dict(vocab_size=1024, eos_token_id=1022, pad_token_id=1023,
                                                hidden_size=64, intermediate_size=64), shard_bytes=300_000)
    config = ModelConfig.from_dir(model_dir)
    reader = CheckpointReader(model_dir)
    want = build_model(config, dtype=torch.bfloat16, device="cuda")
    for name, param in want.named_parameters():
        param.weight_loader(param, reader.read(name).cuda())
    pre = CudaPreinit(torch.cuda.current_device(), num_buffers=3, buffer_bytes=65536).start()
    assert pre.wait(timeout=120), pre.error
    got = build_model(config, dtype=torch.bfloat16, device="cuda")
    load_weights(got, reader, chunk_bytes=65536, num_threads=3, host_buffers=pre.host_tensors())
    torch.cuda.synchronize()
    pre.free_buffers()
    wants = dict(want.named_parameters())
    for name, param in got.named_parameters():
        assert torch.equal(param.view(torch.uint8) if param.dtype != torch.uint8 else param,
                           wants[name].view(torch.uint8) if param.dtype != torch.uint8 else wants[name]), name


@pytest.mark.skipif(sys.platform != "linux", reason="ioprio_set is Linux's")
def test_prefetch_threads_read_at_idle_io_priority_until_raised(tmp_path):
    import ctypes
    import threading

    from quickmoe.checkpoint import prefetch as pf

    if pf._SYS_IOPRIO_SET is None:
        pytest.skip("no ioprio_set number for this machine")
    get = {"x86_64": 252, "aarch64": 31}[__import__("platform").machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    seen = []

    def probe():
        assert pf.set_thread_io_priority(pf.IOPRIO_IDLE)
        seen.append(libc.syscall(get, 1, 0) >> 13)  # this thread's class: 3 = idle
        assert pf.set_thread_io_priority(pf.IOPRIO_NORMAL)
        seen.append(libc.syscall(get, 1, 0) >> 13)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    assert seen[0] == 3 and seen[1] != 3
    assert libc.syscall(get, 1, 0) >> 13 != 3  # the calling thread is untouched


def test_loader_options_from_the_environment():
    from quickmoe.checkpoint.loader_options import LoaderOptions
    from quickmoe.errors import ConfigError

    assert LoaderOptions.from_env({}) == LoaderOptions()
    opts = LoaderOptions.from_env({"QUICKMOE_LOADER": "threads=8, chunk_mib=64,prefetch_threads=2"})
    assert (opts.threads, opts.chunk_bytes, opts.prefetch_threads, opts.buffers) == (8, 64 << 20, 2, LoaderOptions().buffers)
    with pytest.raises(ConfigError, match="'thread=8' is not key=value with a key among"):
        LoaderOptions.from_env({"QUICKMOE_LOADER": "thread=8"})
    with pytest.raises(ConfigError, match="'buffers' = 'many'"):
        LoaderOptions.from_env({"QUICKMOE_LOADER": "buffers=many"})
    with pytest.raises(ConfigError, match="'buffers' = 0"):
        LoaderOptions.from_env({"QUICKMOE_LOADER": "buffers=0"})
    with pytest.raises(ConfigError, match="'prefetch_readahead' = 2: expected 0 or 1"):
        LoaderOptions.from_env({"QUICKMOE_LOADER": "prefetch_readahead=2"})
    assert LoaderOptions.from_env({"QUICKMOE_LOADER": "prefetch_readahead=0"}).prefetch_readahead == 0
    early = EarlyStart.begin(None, "cpu", LoaderOptions(buffers=3))
    assert early.options.buffers == 3 and early.prefetch is None and early.tokenizer is None


def test_cli_rejects_bad_loader_options_before_importing_torch(tmp_path):
    env = {**os.environ, "PYTHONPATH": _pythonpath(), "QUICKMOE_LOADER": "threads=0"}
    out = subprocess.run([sys.executable, "-m", "quickmoe", "generate", str(tmp_path), "--prompt", "x"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2 and "loader option 'threads' = 0: expected a positive integer" in out.stderr

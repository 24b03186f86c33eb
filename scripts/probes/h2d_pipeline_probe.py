"""Where does a warm-page-cache load lose bandwidth? One process, several pipeline variants.

python3 scripts/probes/h2d_pipeline_probe.py DIR

Prints: pinning costs (cudaHostAlloc vs huge-page anonymous memory + cudaHostRegister); host memcpy rate
alone and beside a running H2D copy (memory-bandwidth contention); the reader -> pinned ring -> one copy
stream pipeline for several (threads, chunk, buffers), and hybrids where a few threads copy every r-th
chunk straight from the page cache (cudaHostRegister on the mmapped file, no host copy); and quickmoe's `load_weights` on the built model,
alone and with a CPU-bound Python thread beside it (GIL contention). GB/s are 1e9 bytes per second.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import queue
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

MiB = 1 << 20
_REGISTERED: list[tuple[torch.Tensor, mmap.mmap]] = []  # kept mapped (and registered) until unregister_all()


def thp_buffer(nbytes: int) -> tuple[torch.Tensor, mmap.mmap]:
    """Anonymous memory advised for transparent huge pages, touched, then registered with CUDA."""
    m = mmap.mmap(-1, nbytes + (2 << 20))
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    off = (-addr) % (2 << 20)
    m.madvise(mmap.MADV_HUGEPAGE, off, nbytes)
    arr = np.frombuffer(m, dtype=np.uint8, count=nbytes, offset=off)
    arr[::4096] = 1  # fault the pages in
    t = torch.from_numpy(arr)
    err = torch.cuda.cudart().cudaHostRegister(t.data_ptr(), nbytes, 0)
    assert int(err) == 0, err
    _REGISTERED.append((t, m))
    return t, m


def unregister_all() -> None:
    torch.cuda.synchronize()
    while _REGISTERED:
        t, _m = _REGISTERED.pop()
        torch.cuda.cudart().cudaHostUnregister(t.data_ptr())


def register_copies(files: list[Path], dev: torch.Tensor, jobs: list[tuple], threads: int) -> None:
    """Zero-copy path: each job's file range, mmapped from the page cache, is page-locked in place
    (cudaHostRegister, read-only), copied to `dev` on the thread's stream, then unregistered. It moves
    each byte through host memory once (the DMA read) where the ring path moves it three times."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    maps = {}
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        maps[f] = libc.mmap(None, f.stat().st_size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        os.close(fd)
    cudart = torch.cuda.cudart()
    lock = threading.Lock()
    it = iter(jobs)

    def worker() -> None:
        stream = torch.cuda.Stream()
        while True:
            with lock:
                job = next(it, None)
            if job is None:
                return
            f, off, n, dst = job
            ptr = maps[f] + off
            err = cudart.cudaHostRegister(ptr, n, 8)  # cudaHostRegisterReadOnly
            assert int(err) == 0, err
            src = torch.from_numpy(np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(ptr)))
            with torch.cuda.stream(stream):
                dev[dst:dst + n].copy_(src, non_blocking=True)
            stream.synchronize()
            cudart.cudaHostUnregister(ptr)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for f in files:
        libc.munmap(ctypes.c_void_p(maps[f]), ctypes.c_size_t(f.stat().st_size))


def pipeline(files: list[Path], dev: torch.Tensor, threads: int, chunk: int, bufs: list[torch.Tensor],
             register_threads: int = 0, register_every: int = 0) -> float:
    """Readers preadv chunks in order into a ring; the main thread copies them to `dev` on one stream.
    With `register_every` = r > 0, every r-th chunk instead goes through `register_copies` on
    `register_threads` threads, at the same time (a hybrid that spends less host memory bandwidth)."""
    jobs = []
    base = 0
    for f in files:
        size = f.stat().st_size
        jobs += [(f, off, min(chunk, size - off), base + off) for off in range(0, size, chunk)]
        base += size
    registered = [j for i, j in enumerate(jobs) if register_every and i % register_every == 0]
    jobs = [j for i, j in enumerate(jobs) if not (register_every and i % register_every == 0)]
    fds = {f: os.open(f, os.O_RDONLY) for f in files}
    free: queue.SimpleQueue = queue.SimpleQueue()
    for i in range(len(bufs)):
        free.put((i, None))
    done: dict[int, int] = {}
    cond = threading.Condition()
    take = threading.Lock()
    nxt = [0]

    def reader() -> None:
        while True:
            with take:
                if nxt[0] >= len(jobs):
                    return
                slot, ev = free.get()
                k = nxt[0]
                nxt[0] += 1
            if ev is not None:
                ev.synchronize()
            f, off, n, _ = jobs[k]
            mv = memoryview(bufs[slot].numpy())
            got = 0
            while got < n:
                got += os.preadv(fds[f], [mv[got:n]], off + got)
            with cond:
                done[k] = slot
                cond.notify_all()

    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    ts = [threading.Thread(target=reader) for _ in range(threads)]
    if registered:
        ts.append(threading.Thread(target=register_copies, args=(files, dev, registered, register_threads)))
    for t in ts:
        t.start()
    for k, (_, _, n, dst) in enumerate(jobs):
        with cond:
            while k not in done:
                cond.wait()
            slot = done.pop(k)
        with torch.cuda.stream(stream):
            dev[dst:dst + n].copy_(bufs[slot][:n], non_blocking=True)
            ev = torch.cuda.Event()
            ev.record()
        free.put((slot, ev))
    for t in ts:
        t.join()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    for fd in fds.values():
        os.close(fd)
    return base / dt / 1e9


def main() -> None:
    model_dir = Path(sys.argv[1])
    files = sorted(model_dir.glob("*.safetensors"))
    total = sum(f.stat().st_size for f in files)
    for p in ("/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel/mm/transparent_hugepage/defrag"):
        print(p, open(p).read().strip() if os.path.exists(p) else "-")
    print("kernel", os.uname().release, flush=True)
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while fh.read(1 << 26):
                pass
    torch.empty(1, device="cuda")
    dev = torch.empty(total, dtype=torch.uint8, device="cuda")
    # pinning costs
    t0 = time.perf_counter()
    _pinned = [torch.empty(32 * MiB, dtype=torch.uint8, pin_memory=True) for _ in range(16)]
    t_alloc = time.perf_counter() - t0
    t0 = time.perf_counter()
    big = torch.empty(512 * MiB, dtype=torch.uint8, pin_memory=True)
    t_alloc1 = time.perf_counter() - t0
    t0 = time.perf_counter()
    thp, _keep = thp_buffer(512 * MiB)
    t_thp = time.perf_counter() - t0
    print(f"pin 512 MiB: cudaHostAlloc 16 x 32 MiB {t_alloc:.3f} s; one 512 MiB {t_alloc1:.3f} s; "
          f"THP anon + cudaHostRegister {t_thp:.3f} s", flush=True)
    # H2D ceilings
    host = torch.randint(0, 255, (1 << 30,), dtype=torch.uint8).pin_memory()
    times = []
    for _ in range(8):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dev[:1 << 30].copy_(host, non_blocking=True)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    ceiling = (1 << 30) / statistics.median(times[2:]) / 1e9
    big.copy_(torch.randint(0, 255, (512 * MiB,), dtype=torch.uint8))
    thp.copy_(big)
    for name, src in (("cudaHostAlloc", big), ("THP registered", thp)):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(4):
            dev[:512 * MiB].copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        print(f"H2D from {name} 512 MiB: {4 * 512 * MiB / (time.perf_counter() - t0) / 1e9:.1f} GB/s", flush=True)
    print(f"pinned H2D ceiling (1 GiB copy, median): {ceiling:.1f} GB/s", flush=True)
    # memcpy alone, and beside a continuous H2D
    srcs = [np.random.randint(0, 255, 64 * MiB, dtype=np.uint8) for _ in range(16)]
    dsts = [np.empty(64 * MiB, dtype=np.uint8) for _ in range(16)]
    for n in (8, 16):
        def cp(i: int) -> None:
            for _ in range(8):
                np.copyto(dsts[i], srcs[i])
        for beside in (False, True):
            stop = threading.Event()
            h2d = [0]

            def pump() -> None:
                s = torch.cuda.Stream()
                with torch.cuda.stream(s):
                    while not stop.is_set():
                        dev[:1 << 30].copy_(host, non_blocking=True)
                        s.synchronize()
                        h2d[0] += 1 << 30
            pt = threading.Thread(target=pump)
            if beside:
                pt.start()
                time.sleep(0.2)
            t0 = time.perf_counter()
            ts = [threading.Thread(target=cp, args=(i,)) for i in range(n)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            dt = time.perf_counter() - t0
            h0 = h2d[0]
            stop.set()
            if beside:
                pt.join()
            print(f"host memcpy {n} threads{' beside H2D' if beside else ''}: {n * 8 * 64 * MiB / dt / 1e9:.1f} GB/s"
                  + (f" (H2D meanwhile about {h0 / (dt + 0.2) / 1e9:.1f} GB/s)" if beside else ""), flush=True)
    # the loader's pipeline shape
    ring = [torch.empty(64 * MiB, dtype=torch.uint8, pin_memory=True) for _ in range(32)]
    thp_ring = [thp_buffer(64 * MiB)[0] for _ in range(16)]
    rows = []
    for threads, chunk_mb, nbuf, kind in [(8, 32, 16, "pinned"), (12, 32, 16, "pinned"), (16, 32, 16, "pinned"),
                                          (16, 32, 32, "pinned"), (16, 16, 32, "pinned"), (16, 64, 32, "pinned"),
                                          (12, 64, 24, "pinned"), (16, 64, 16, "thp"), (8, 64, 16, "thp"),
                                          (16, 32, 16, "pinned")]:
        bufs = [b[:chunk_mb * MiB] for b in (ring if kind == "pinned" else thp_ring)[:nbuf]]
        rate = pipeline(files, dev, threads, chunk_mb * MiB, bufs)
        rows.append(rate)
        print(f"pipeline {kind:6s} {threads:2d} readers x {chunk_mb:2d} MiB chunks, {nbuf} buffers: {rate:5.1f} GB/s "
              f"({100 * rate / ceiling:.0f}% of H2D)", flush=True)
    # hybrid: the ring pipeline plus a few threads copying every r-th chunk straight from the page cache
    for threads, reg_threads, every in [(14, 2, 6), (12, 4, 4), (12, 4, 3), (16, 4, 4)]:
        bufs = [b[:32 * MiB] for b in ring[:32]]
        rate = pipeline(files, dev, threads, 32 * MiB, bufs, register_threads=reg_threads, register_every=every)
        print(f"hybrid {threads:2d} readers x 32 MiB, 32 buffers + {reg_threads} registering threads for every "
              f"{every}th chunk: {rate:5.1f} GB/s ({100 * rate / ceiling:.0f}% of H2D)", flush=True)
    dev = ring = thp_ring = thp = _keep = None  # free them (the pump closure above also saw `dev`)
    unregister_all()
    torch.cuda.empty_cache()
    # quickmoe's loader on the real model, alone and beside a GIL-holding thread
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from quickmoe.checkpoint.loader import load_weights
    from quickmoe.checkpoint.reader import CheckpointReader
    from quickmoe.config import ModelConfig
    from quickmoe.models.registry import build_model

    model = build_model(ModelConfig.from_dir(model_dir), dtype=torch.bfloat16, device="cuda")
    reader = CheckpointReader(model_dir)
    for label in ("alone", "alone", "beside a CPU-bound Python thread"):
        stop = threading.Event()

        def spin() -> None:
            x = 0
            while not stop.is_set():
                x = (x * 31 + 7) % 1000003
        sp = threading.Thread(target=spin)
        if "beside" in label:
            sp.start()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        st = load_weights(model, reader)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        stop.set()
        if "beside" in label:
            sp.join()
        print(f"load_weights {label}: {st.num_bytes / dt / 1e9:.1f} GB/s ({dt:.3f} s; wait {st.wait_seconds:.2f} "
              f"deliver {st.deliver_seconds:.2f} setup {st.setup_seconds:.2f} finish {st.finish_seconds:.2f})",
              flush=True)


if __name__ == "__main__":
    main()

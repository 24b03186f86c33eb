"""Measure the host I/O paths a checkpoint can take to the GPU, on this machine, in one process.

PYTHONPATH=src python3 scripts/probes/io_probe.py DIR [--cold]

Warm page cache: pinned host->device ceiling; buffered preadv into pinned buffers (read only, and with
the H2D copy overlapped) for several thread counts; mmap + cudaHostRegister(read-only) + H2D straight from
the page cache. With --cold (root): the page cache is dropped before each disk read (buffered and O_DIRECT,
several thread counts) and `import torch` is timed cold, alone and beside a parallel read of the shards.
Prints one line per measurement; figures are GB/s of checkpoint bytes (1e9).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

MiB = 1 << 20


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def windows(files: list[Path], chunk: int) -> list[tuple[Path, int, int]]:
    out = []
    for f in files:
        size = f.stat().st_size
        out += [(f, off, min(chunk, size - off)) for off in range(0, size, chunk)]
    return out


def file_offsets(files: list[Path]) -> dict[Path, int]:
    """Where each file's bytes start in one buffer holding all files back to back."""
    out, acc = {}, 0
    for f in files:
        out[f] = acc
        acc += f.stat().st_size
    return out


def run_threads(n: int, jobs: list, work) -> float:
    lock = threading.Lock()
    it = iter(jobs)

    def loop(i: int) -> None:
        while True:
            with lock:
                job = next(it, None)
            if job is None:
                return
            work(i, job)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=loop, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0


def read_rate(files: list[Path], threads: int, chunk: int, direct: bool = False, bufs=None) -> float:
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fds = {f: os.open(f, flags) for f in files}
    if bufs is None:
        bufs = [mmap.mmap(-1, chunk) for _ in range(threads)]  # page-aligned (O_DIRECT needs alignment)
    jobs = windows(files, chunk)

    def work(i, job):
        f, off, n = job
        mv = memoryview(bufs[i])
        want = (n + 4095) // 4096 * 4096 if direct else n
        got = 0
        while got < n:
            r = os.preadv(fds[f], [mv[got:want]], off + got)
            if r == 0:
                break
            got += r

    dt = run_threads(threads, jobs, work)
    for fd in fds.values():
        os.close(fd)
    return sum(j[2] for j in jobs) / dt / 1e9


def main() -> None:
    model_dir = Path(sys.argv[1])
    cold = "--cold" in sys.argv
    files = sorted(model_dir.glob("*.safetensors"))
    total = sum(f.stat().st_size for f in files)
    print(f"checkpoint {model_dir}: {len(files)} shards, {total / 1e9:.2f} GB; cpus {os.cpu_count()}", flush=True)
    if cold:
        for threads, chunk, direct in [(1, 32, False), (4, 32, False), (16, 32, False), (32, 16, False),
                                       (16, 32, True), (64, 16, True), (128, 8, True)]:
            drop_caches()
            rate = read_rate(files[:1], threads, chunk * MiB, direct)
            print(f"cold disk: {'O_DIRECT' if direct else 'buffered'} {threads:3d} threads x {chunk} MiB: "
                  f"{rate:5.2f} GB/s", flush=True)
        py = [sys.executable, "-c", "import time; t=time.perf_counter(); import torch; torch.cuda.init(); "
              "print(f'{time.perf_counter()-t:.2f}')"]
        drop_caches()
        t0 = time.perf_counter()
        out = subprocess.run(py, capture_output=True, text=True).stdout.strip()
        print(f"cold import torch + cuda init: {out} s (process {time.perf_counter() - t0:.2f} s)", flush=True)
        for direct in (True, False):
            drop_caches()
            box = {}
            reader = threading.Thread(target=lambda: box.setdefault("r", read_rate(files, 16, 32 * MiB, direct)))
            t0 = time.perf_counter()
            reader.start()
            out = subprocess.run(py, capture_output=True, text=True).stdout.strip()
            t_imp = time.perf_counter() - t0
            reader.join()
            print(f"cold import torch + cuda init beside {'an O_DIRECT' if direct else 'a buffered'} 16-thread read "
                  f"of all shards: {out} s (process {t_imp:.2f} s); the read: {box['r']:.2f} GB/s, done at "
                  f"{time.perf_counter() - t0:.2f} s", flush=True)
    for f in files:  # warm the page cache
        subprocess.run(["cat", str(f)], stdout=subprocess.DEVNULL, check=True)
    t0 = time.perf_counter()
    import torch

    torch.cuda.init()
    print(f"import torch + cuda init (warm): {time.perf_counter() - t0:.2f} s", flush=True)
    from quickmoe.bench.coldstart import measure_pinned_h2d_gb_per_s

    ceiling = measure_pinned_h2d_gb_per_s()
    print(f"pinned H2D ceiling: {ceiling:.1f} GB/s", flush=True)
    t0 = time.perf_counter()
    pinned = [torch.empty(64 * MiB, dtype=torch.uint8, pin_memory=True) for _ in range(32)]
    print(f"pin 32 x 64 MiB: {time.perf_counter() - t0:.3f} s", flush=True)
    for threads in (8, 16, 24, 32):
        for chunk in (32, 64):
            bufs = [memoryview(p[:chunk * MiB].numpy()) for p in pinned[:threads]]
            rate = read_rate(files, threads, chunk * MiB, bufs=bufs)
            print(f"warm preadv -> pinned, {threads:2d} threads x {chunk} MiB: {rate:5.1f} GB/s "
                  f"({100 * rate / ceiling:.0f}% of H2D)", flush=True)
    dev = torch.empty(total, dtype=torch.uint8, device="cuda")
    for threads in (16, 32):
        chunk = 32 * MiB
        fds = {f: os.open(f, os.O_RDONLY) for f in files}
        base = file_offsets(files)
        streams = [torch.cuda.Stream() for _ in range(threads)]
        pairs = [(pinned[i % 32][:chunk], pinned[(i + 16) % 32][:chunk]) for i in range(threads)]
        events = [[None, None] for _ in range(threads)]
        count = [0] * threads

        def work(i, job):
            f, off, n = job
            k = count[i] % 2
            count[i] += 1
            if events[i][k] is not None:
                events[i][k].synchronize()
            buf = pairs[i][k]
            mv = memoryview(buf.numpy())
            got = 0
            while got < n:
                got += os.preadv(fds[f], [mv[got:n]], off + got)
            with torch.cuda.stream(streams[i]):
                dev[base[f] + off:base[f] + off + n].copy_(buf[:n], non_blocking=True)
                ev = torch.cuda.Event()
                ev.record()
            events[i][k] = ev

        dt = run_threads(threads, windows(files, chunk), work)
        torch.cuda.synchronize()
        dt_all = dt
        print(f"warm preadv -> pinned -> H2D (overlapped), {threads} threads x 32 MiB: {total / dt_all / 1e9:5.1f} GB/s "
              f"({100 * total / dt_all / 1e9 / ceiling:.0f}% of H2D)", flush=True)
        for fd in fds.values():
            os.close(fd)
    # mmap + cudaHostRegister(read-only) + H2D straight from the page cache
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    cudart = torch.cuda.cudart()
    for threads, chunk_mb, populate in [(8, 64, True), (16, 64, True), (16, 256, True), (16, 64, False)]:
        chunk = chunk_mb * MiB
        t0 = time.perf_counter()
        maps = {}
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0x8000) if populate else 0)
            addr = libc.mmap(None, f.stat().st_size, mmap.PROT_READ, flags, fd, 0)
            os.close(fd)
            maps[f] = addr
        t_map = time.perf_counter() - t0
        base = file_offsets(files)
        streams = [torch.cuda.Stream() for _ in range(threads)]
        reg_time = [0.0] * threads
        pend = [[] for _ in range(threads)]

        def work(i, job):
            f, off, n = job
            ptr = maps[f] + off
            t1 = time.perf_counter()
            err = cudart.cudaHostRegister(ptr, n, 8)  # cudaHostRegisterReadOnly
            reg_time[i] += time.perf_counter() - t1
            if int(err) != 0:
                raise RuntimeError(f"cudaHostRegister: {err}")
            src = torch.from_numpy(__import__("numpy").ctypeslib.as_array((ctypes.c_uint8 * n).from_address(ptr)))
            with torch.cuda.stream(streams[i]):
                dev[base[f] + off:base[f] + off + n].copy_(src, non_blocking=True)
                ev = torch.cuda.Event()
                ev.record()
            pend[i].append((ev, ptr))
            while len(pend[i]) > 2:
                e, p = pend[i].pop(0)
                e.synchronize()
                cudart.cudaHostUnregister(p)

        t0 = time.perf_counter()
        run_threads(threads, windows(files, chunk), work)
        for p in pend:
            for e, ptr in p:
                e.synchronize()
                cudart.cudaHostUnregister(ptr)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        for f in files:
            libc.munmap(ctypes.c_void_p(maps[f]), ctypes.c_size_t(f.stat().st_size))
        rate = total / (dt + t_map) / 1e9
        print(f"warm mmap{'(populate)' if populate else ''} + register + H2D, {threads} threads x {chunk_mb} MiB: "
              f"{rate:5.1f} GB/s ({100 * rate / ceiling:.0f}% of H2D; mmap {t_map:.3f} s, copy phase {dt:.3f} s, "
              f"register summed {sum(reg_time):.2f} s)", flush=True)


if __name__ == "__main__":
    main()

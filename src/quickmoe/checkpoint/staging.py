"""A ring of host buffers filled with checkpoint chunks by a few reader threads, consumed in order.

`ChunkRing(chunks, ...)` starts `num_threads` threads that `os.preadv` each chunk (in plan order) into one
of `num_buffers` host buffers of `buffer_bytes` (page-locked when `pin_memory`, so host->device copies
from them are asynchronous). Iterating the ring yields `(chunk, host_view, slot)` strictly in chunk
order; the consumer hands each slot back with `release(slot, ready)` once it no longer needs the bytes,
where `ready` is an optional CUDA event: the next reader of that slot waits on it before overwriting the
buffer (the device copy out of the buffer may still be running when the consumer releases it).

Host memory used is at most `num_buffers * buffer_bytes`, allocated lazily (a small checkpoint touches
only the buffers it needs), unless `buffers` allocated beforehand are given (the early start's page-locked
ring): then those are the ring, one slot each. Read errors are re-raised in the consumer as CheckpointError naming the file;
an error in the consumer (or `close()`) stops the readers.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Protocol

import torch

from quickmoe.checkpoint.chunk_plan import Chunk
from quickmoe.errors import CheckpointError
from quickmoe.paths import open_regular

__all__ = ["ChunkRing", "ReadyEvent"]

logger = logging.getLogger(__name__)


class ReadyEvent(Protocol):
    """What a released slot may carry: something to wait on before its buffer is overwritten
    (a `torch.cuda.Event` recorded after the copy out of the buffer)."""

    def synchronize(self) -> None: ...


class _Stop(Exception):
    """Raised inside a reader thread when the ring is closed while it waits."""


class ChunkRing:
    """Reads `chunks` into a ring of host buffers with a few threads; iterate to consume them in order."""

    def __init__(self, chunks: Sequence[Chunk], *, num_threads: int, num_buffers: int, buffer_bytes: int,
                 pin_memory: bool, buffers: Sequence[torch.Tensor] | None = None) -> None:
        if buffers is not None:  # allocated beforehand (e.g. page-locked by the early start): use them as is
            unfit = [b for b in buffers if b.dtype != torch.uint8 or b.dim() != 1 or b.numel() < buffer_bytes]
            if not buffers or unfit:
                raise ValueError(f"ChunkRing: {len(buffers)} given buffers, expected at least one 1-D uint8 buffer "
                                 f"of >= {buffer_bytes} bytes each")
            num_buffers = len(buffers)
        if num_threads < 1 or num_buffers < 1:
            raise ValueError(f"num_threads = {num_threads}, num_buffers = {num_buffers}: expected at least 1 each")
        too_big = [c for c in chunks if c.nbytes > buffer_bytes]
        if too_big:
            raise ValueError(f"chunk {too_big[0].index} ({too_big[0].nbytes} bytes) exceeds buffer_bytes = "
                             f"{buffer_bytes}")
        self.chunks = list(chunks)
        self.buffer_bytes = buffer_bytes
        self.pin_memory = pin_memory
        self.num_buffers = num_buffers = max(1, min(num_buffers, len(self.chunks)))
        self.num_threads = max(1, min(num_threads, num_buffers, len(self.chunks)))
        self._buffers: list[torch.Tensor | None] = (list(buffers[:num_buffers]) if buffers is not None
                                                     else [None] * num_buffers)
        self._views: list[memoryview | None] = [None] * num_buffers
        # Free slots, handed out in the order they are taken. A slot is taken together with the next chunk
        # index under `_take_lock`, so chunks get buffers in chunk order: chunk k never waits for a buffer
        # that only a chunk > k holds, and the consumer (who frees slots in chunk order) cannot deadlock.
        self._free: queue.SimpleQueue[tuple[int, ReadyEvent | None]] = queue.SimpleQueue()
        for slot in range(num_buffers):
            self._free.put((slot, None))
        self._take_lock = threading.Lock()
        self._next_chunk = 0
        self._cond = threading.Condition()
        self._done: dict[int, int] = {}  # chunk index -> slot, for chunks read and not yet consumed
        self._error: BaseException | None = None
        self._stopped = False
        self._fds: dict[Path, int] = {}
        self.read_seconds = 0.0  # summed over reader threads (time inside preadv)
        self.copy_wait_seconds = 0.0  # summed over reader threads (waiting for a slot's device copy)
        self.wait_seconds = 0.0  # consumer time waiting for the next chunk to be read
        self.setup_seconds = 0.0  # summed over reader threads (allocating and pinning buffers)
        self._threads: list[threading.Thread] = []
        try:
            for file in dict.fromkeys(c.file for c in self.chunks):
                self._fds[file] = _open(file)
        except BaseException:
            self._close_fds()
            raise
        for i in range(self.num_threads):
            t = threading.Thread(target=self._reader, name=f"quickmoe-read-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    @property
    def allocated_bytes(self) -> int:
        """Host bytes held by the ring's buffers so far."""
        return sum(b.numel() for b in self._buffers if b is not None)

    # -- readers ----------------------------------------------------------------------------------------

    def _take(self) -> tuple[Chunk, int, ReadyEvent | None] | None:
        with self._take_lock:
            if self._stopped or self._next_chunk >= len(self.chunks):
                return None
            slot, ready = self._free.get()  # blocks until the consumer releases one
            if slot < 0:
                raise _Stop
            chunk = self.chunks[self._next_chunk]
            self._next_chunk += 1
            return chunk, slot, ready

    def _reader(self) -> None:
        try:
            while (job := self._take()) is not None:
                chunk, slot, ready = job
                if ready is not None:
                    # The slot's previous chunk may still be copying to the device: overwrite only after.
                    t0 = time.perf_counter()
                    ready.synchronize()
                    self._add("copy_wait_seconds", time.perf_counter() - t0)
                view = self._view(slot)
                t0 = time.perf_counter()
                _pread_exact(self._fds[chunk.file], chunk, view)
                self._add("read_seconds", time.perf_counter() - t0)
                with self._cond:
                    self._done[chunk.index] = slot
                    self._cond.notify_all()
        except _Stop:
            pass
        except BaseException as exc:  # handed to the consumer, which re-raises it
            with self._cond:
                if self._error is None:
                    self._error = exc
                self._cond.notify_all()

    def _buffer(self, slot: int) -> torch.Tensor:
        buf = self._buffers[slot]
        if buf is None:  # lazily: the first reads start while later buffers are still being pinned
            t0 = time.perf_counter()
            buf = torch.empty(self.buffer_bytes, dtype=torch.uint8, pin_memory=self.pin_memory)
            self._buffers[slot] = buf  # one slot is only ever touched by the thread holding it
            self._add("setup_seconds", time.perf_counter() - t0)
        return buf

    def _view(self, slot: int) -> memoryview:
        """The slot's buffer as a memoryview, made once per slot (readers then make no torch call per read)."""
        view = self._views[slot]
        if view is None:
            view = self._views[slot] = memoryview(self._buffer(slot).numpy())
        return view

    def _add(self, field: str, seconds: float) -> None:
        with self._cond:
            setattr(self, field, getattr(self, field) + seconds)

    # -- consumer ---------------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[tuple[Chunk, torch.Tensor, int]]:
        """(chunk, host bytes of the chunk, slot) in chunk order; `release(slot)` each when done."""
        for chunk in self.chunks:
            t0 = time.perf_counter()
            with self._cond:
                while chunk.index not in self._done and self._error is None:
                    self._cond.wait()
                if self._error is not None:
                    self._raise()
                slot = self._done.pop(chunk.index)
            self.wait_seconds += time.perf_counter() - t0
            buf = self._buffers[slot]
            assert buf is not None
            yield chunk, buf[:chunk.nbytes], slot

    def release(self, slot: int, ready: ReadyEvent | None = None) -> None:
        """Give a slot back; its next reader waits on `ready` (if any) before overwriting the buffer."""
        self._free.put((slot, ready))

    def _raise(self) -> None:
        exc = self._error
        if isinstance(exc, CheckpointError):
            raise exc
        if isinstance(exc, OSError):
            name = exc.filename or "checkpoint file"
            raise CheckpointError(f"{name}: cannot read ({exc})") from exc
        raise RuntimeError(f"checkpoint reader thread failed: {exc!r}") from exc

    def close(self) -> None:
        """Stop the readers (waking any that wait for a slot), join them and close the files."""
        with self._cond:
            self._stopped = True
        for _ in self._threads:
            self._free.put((-1, None))  # a reader blocked in _take wakes up and stops
        for t in self._threads:
            t.join()
        self._threads.clear()
        self._close_fds()

    def _close_fds(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> ChunkRing:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _open(file: Path) -> int:
    try:
        fd = open_regular(file)
    except OSError as exc:
        raise CheckpointError(f"{file}: cannot open ({exc})") from None
    if hasattr(os, "posix_fadvise"):
        try:  # a hint only: larger kernel read-ahead for our in-order reads
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        except OSError as exc:
            logger.debug("%s: posix_fadvise(SEQUENTIAL) failed: %s", file, exc)
    return fd


def _pread_exact(fd: int, chunk: Chunk, view: memoryview) -> None:
    """Fill view[:chunk.nbytes] from the file at chunk.offset; preadv may return less than asked."""
    got = 0
    while got < chunk.nbytes:
        try:
            n = os.preadv(fd, [view[got:chunk.nbytes]], chunk.offset + got)
        except OSError as exc:
            raise CheckpointError(f"{chunk.file}: cannot read {chunk.nbytes} bytes at offset {chunk.offset} "
                                  f"({exc})") from None
        if n == 0:
            break
        got += n
    if got != chunk.nbytes:
        names = (", ".join(dict.fromkeys(p.entry.name for p in chunk.pieces))
                 or "not named (the chunk of a cached load plan)")
        raise CheckpointError(f"{chunk.file}: short read: expected {chunk.nbytes} bytes at offset {chunk.offset}, "
                              f"got {got} (the file was truncated or changed after opening); tensor(s) {names}")

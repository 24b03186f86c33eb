"""Worker processes that compile Triton kernels side by side (`python -m quickmoe.executor.compile_workers`, one
JSON request a line on stdin, one JSON answer a line on stdout; the requests and the worker's loop are in
executor/compile_workers.py).

`CompilePool` starts N workers; `run(requests)` hands them a list and returns the results in order, and `stream()`
a `CompileStream`, which takes requests one at a time while the workers compile (the kernel precompile submits
them as its dry launches record them), the most urgent first.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

from quickmoe.executor.compile_workers import CompileResult, KernelRequest

__all__ = ["CompilePool", "CompileStream"]


class CompilePool:
    """`workers` worker processes compiling requests side by side: `run(requests)` returns their results (in the
    order given) once all are done; `stream()` takes requests one at a time while they compile. Use as a context
    manager: the workers exit when it closes."""

    def __init__(self, workers: int, *, launchers: bool = True, low_priority: bool = False) -> None:
        if workers < 1:
            raise ValueError(f"workers = {workers}: expected >= 1")
        cmd = [sys.executable, "-m", "quickmoe.executor.compile_workers"] + ([] if launchers else ["--no-launchers"])
        if low_priority and shutil.which("nice"):  # started beside the weight load: the load goes first
            cmd = ["nice", "-n", "10", *cmd]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.workers = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)
                        for _ in range(workers)]

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, requests: Sequence[KernelRequest], *, progress: bool = False) -> list[CompileResult]:
        """Hand each request to the next free worker; a worker that dies fails its request and takes no more.
        `progress`: a progress bar on stderr."""
        stream = self.stream(progress=progress)
        for request in requests:
            stream.submit(request)
        return stream.finish()

    def stream(self, *, progress: bool = False,
               priority: Callable[[KernelRequest], int] | None = None) -> CompileStream:
        """A `CompileStream` over these workers (one at a time)."""
        return CompileStream(self.workers, progress=progress, priority=priority)

    def close(self) -> None:
        """Stop the workers (between requests: none is compiling; one still importing need not finish)."""
        for proc in self.workers:
            try:
                proc.stdin.close()
            except OSError:
                pass
            proc.terminate()
        for proc in self.workers:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class CompileStream:
    """Requests handed to a pool's workers as they come (`submit`, from any one thread), while the submitter goes on:
    each worker's thread takes the next waiting request when its worker answers the last, the lowest
    `priority(request)` first (then the first submitted). `finish()` waits for all and returns the results in
    submission order; a worker that dies fails its request and takes no more, and requests no worker was left to
    take fail as such."""

    def __init__(self, workers: Sequence[subprocess.Popen], *, progress: bool = False,
                 priority: Callable[[KernelRequest], int] | None = None) -> None:
        self.requests: list[KernelRequest] = []
        self.results: list[CompileResult | None] = []
        self.priority = priority
        self.waiting: queue.PriorityQueue = queue.PriorityQueue()  # (priority, index, request); None: stop
        self.lock = threading.Lock()
        self.bar = None
        if progress:
            from tqdm import tqdm

            self.bar = tqdm(total=0, unit="kernel", desc="compiling kernels", leave=False)
        self.threads = [threading.Thread(target=self._serve, args=(p,), name=f"quickmoe-compile-{i}", daemon=True)
                        for i, p in enumerate(workers)]
        for t in self.threads:
            t.start()

    def submit(self, request: KernelRequest) -> None:
        with self.lock:
            index = len(self.requests)
            self.requests.append(request)
            self.results.append(None)
            if self.bar is not None:
                self.bar.total += 1
                self.bar.refresh()
        self.waiting.put((self.priority(request) if self.priority is not None else 0, index, request))

    def _serve(self, proc: subprocess.Popen) -> None:
        while True:
            _, index, request = self.waiting.get()
            if request is None:
                return
            started = time.perf_counter()
            try:
                proc.stdin.write(request.to_json() + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    raise EOFError(f"the compile worker exited (code {proc.poll()})")
                answer = json.loads(line)
                result = CompileResult(request, answer["seconds"], answer["cached"], answer["error"],
                                       answer["launcher_error"])
            except (OSError, EOFError, ValueError) as exc:
                with self.lock:
                    self.results[index] = CompileResult(request, time.perf_counter() - started, False,
                                                        f"{type(exc).__name__}: {exc}")
                return
            with self.lock:
                self.results[index] = result
                if self.bar is not None:
                    self.bar.update(1)

    def finish(self) -> list[CompileResult]:
        for i, _ in enumerate(self.threads):  # after every waiting request
            self.waiting.put((float("inf"), i, None))
        for t in self.threads:
            t.join()
        if self.bar is not None:
            self.bar.close()
        with self.lock:
            return [r if r is not None else CompileResult(self.requests[i], 0.0, False,
                                                           "no worker was left to compile it")
                    for i, r in enumerate(self.results)]

"""The work a process starts first thing, before `import torch`, so that start-up phases overlap.

`EarlyStart.begin(model_dir, device)` launches, on background threads:
- a `PageCachePrefetch` of the checkpoint's shards (a cold page cache then fills while torch imports;
  a warm one is probed and skipped);
- a `CudaPreinit` for a CUDA device: the primary context and the loader's page-locked host ring;
- the tokenizer's load. HF `tokenizers` parses tokenizer.json holding the GIL (0.3-0.7 s for o200k; ~0.2 s
  once the file is recognised as o200k_harmony, tokenizer/recognise.py); beside the loader it would stall
  the reader threads and the copies, so it runs during the imports.
The engine picks them up later (`ModelRunner`, `LLM`): it waits for the context before torch's CUDA
init, hands the ring to the loader, stops the prefetch after loading, frees the ring after weight
processing, and takes the tokenizer when it needs it.

Environment switches (for comparisons; all default on): QUICKMOE_PREFETCH=0 disables the prefetch,
QUICKMOE_EARLY_TOKENIZER=0 leaves the tokenizer to the engine (a thread started beside the weights' load),
QUICKMOE_CUDA_PREINIT=0 the CUDA pre-initialisation, QUICKMOE_CUDA_PREINIT=context creates the context only (the
loader pins its ring itself, after the imports: does page-locking 512 MiB beside the imports slow them?);
QUICKMOE_LOADER sizes them (`LoaderOptions`). This module imports only the standard library.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quickmoe.checkpoint.loader_options import LoaderOptions
from quickmoe.checkpoint.prefetch import PageCachePrefetch, checkpoint_files
from quickmoe.errors import ConfigError
from quickmoe.startup.cuda_preinit import CudaPreinit

__all__ = ["EarlyStart", "cuda_ordinal"]

logger = logging.getLogger(__name__)


def cuda_ordinal(device: str) -> int | None:
    """The CUDA device index a `--device` value will use, or None for CPU. 'auto' guesses device 0 (if
    there is no CUDA device, the pre-initialisation fails quietly and nothing is lost)."""
    if device in ("auto", "cuda"):
        return 0
    if device.startswith("cuda:") and device[5:].isdigit():
        return int(device[5:])
    return None


def _load_tokenizer(model_dir: Path, timing: dict[str, float]):  # -> Tokenizer; imported on the thread (no torch)
    t0 = time.perf_counter()
    from quickmoe.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(model_dir)
    timing["seconds"] = time.perf_counter() - t0  # `tokenizers` parsing tokenizer.json (or harmony), holding the GIL
    timing["kind"] = type(tokenizer).__name__  # O200kHarmonyTokenizer: tokenizer.json recognised as o200k_harmony
    return tokenizer


def _enabled(variable: str) -> bool:
    return os.environ.get(variable, "1") != "0"


CUDA_PREINIT_MODES = ("0", "1", "context")


def _cuda_preinit_mode() -> str:
    mode = os.environ.get("QUICKMOE_CUDA_PREINIT", "1")
    if mode not in CUDA_PREINIT_MODES:
        raise ConfigError(f"QUICKMOE_CUDA_PREINIT = {mode!r}: expected one of {list(CUDA_PREINIT_MODES)}")
    return mode


@dataclass
class EarlyStart:
    """Background start-up work launched before the heavy imports; either part may be None (disabled)."""

    prefetch: PageCachePrefetch | None
    cuda: CudaPreinit | None
    tokenizer: Future | None  # -> quickmoe.tokenizer.Tokenizer
    options: LoaderOptions
    started_at: float  # time.perf_counter() at begin()
    tokenizer_timing: dict[str, float] = field(default_factory=dict)  # "seconds" once the tokenizer has loaded

    @classmethod
    def begin(cls, model_dir: str | Path | None, device: str, options: LoaderOptions | None = None) -> EarlyStart:
        """Start the prefetch (when `model_dir` has shards), the CUDA pre-initialisation (when `device` may
        be CUDA) and the tokenizer's load (when `model_dir` is given); returns at once. `options` (default:
        `LoaderOptions.from_env()`) size the ring and the prefetch; the loader later uses the same."""
        started_at = time.perf_counter()
        options = options if options is not None else LoaderOptions.from_env()
        prefetch = tokenizer = None
        tokenizer_timing: dict[str, float] = {}
        if model_dir is not None and _enabled("QUICKMOE_EARLY_TOKENIZER"):
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quickmoe-tokenizer")
            tokenizer = pool.submit(_load_tokenizer, Path(model_dir), tokenizer_timing)
            pool.shutdown(wait=False)  # the thread ends after its one task
        if model_dir is not None and _enabled("QUICKMOE_PREFETCH"):
            files = checkpoint_files(model_dir)
            if files:
                prefetch = PageCachePrefetch(files, num_threads=options.prefetch_threads,
                                             read_bytes=options.prefetch_read_kib << 10,
                                             readahead=bool(options.prefetch_readahead)).start()
        cuda = None
        ordinal, mode = cuda_ordinal(device), _cuda_preinit_mode()
        if ordinal is not None and mode != "0":
            cuda = CudaPreinit(ordinal, num_buffers=options.buffers if mode == "1" else 0,
                               buffer_bytes=options.chunk_bytes).start()
        return cls(prefetch=prefetch, cuda=cuda, tokenizer=tokenizer, options=options, started_at=started_at,
                   tokenizer_timing=tokenizer_timing)

    def imports_done(self) -> None:
        """The imports' own disk reads are over: the prefetch may read at normal I/O priority."""
        if self.prefetch is not None:
            self.prefetch.raise_priority()

    def stop_prefetch(self) -> None:
        """Stop the prefetch (the loader has read every shard)."""
        if self.prefetch is not None:
            self.prefetch.stop()

    def finish(self) -> None:
        """Stop the prefetch and free the host ring (call once every copy out of the ring has completed).
        Unpinning 512 MiB takes a while, so it runs on a thread, off the start-up's critical path."""
        self.stop_prefetch()
        if self.cuda is not None:
            threading.Thread(target=self.cuda.free_buffers, name="quickmoe-free-ring", daemon=True).start()

    def info(self) -> dict[str, Any]:
        """What the background work did, for the StartupReport."""
        out: dict[str, Any] = {}
        if self.prefetch is not None:
            s = self.prefetch.stats()
            out["prefetch"] = {"read_bytes": s.read_bytes, "resident_bytes": s.resident_bytes,
                               "failed_files": s.failed_files, "seconds": round(s.seconds, 4)}
        if self.cuda is not None:
            out["cuda_preinit"] = {"ok": self.cuda.error is None, "error": self.cuda.error,
                                   "context_seconds": round(self.cuda.context_seconds, 4),
                                   "host_buffer_seconds": round(self.cuda.buffer_seconds, 4),
                                   "host_buffer_bytes": self.cuda.num_buffers * self.cuda.buffer_bytes}
        if "seconds" in self.tokenizer_timing:
            out["tokenizer"] = {"seconds": round(self.tokenizer_timing["seconds"], 4),
                                "kind": self.tokenizer_timing.get("kind")}
        return out

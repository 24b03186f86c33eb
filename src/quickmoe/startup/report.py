"""StartupReport: every phase of a cold start, timed, logged as one block and available as JSON.

Phases, in order: interpreter (process creation -> quickmoe's first line runs), imports (torch and the
engine's modules), cuda_init, config (config.json + checkpoint headers), build (model allocation),
load (read + host->device, with GB/s), process (weight re-layout), kv_cache (sizing and allocating the
paged KV cache), precompile (Triton kernels the cache lacks, compiled in worker processes:
executor/kernel_precompile.py), compile (torch.compile) and capture (decode CUDA graphs), tokenizer, first_token (the first request's first token). `total` runs from
process creation to the last phase marked.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from quickmoe import _IMPORT_PERF_COUNTER

logger = logging.getLogger(__name__)

PHASES = ("interpreter", "imports", "cuda_init", "config", "build", "load", "process", "kv_cache", "precompile",
          "compile", "capture", "tokenizer", "first_token")


def process_age_s() -> float | None:
    """Seconds since this process was created (Linux /proc), or None where that is not available."""
    try:
        with open("/proc/self/stat") as f:
            # field 22 (starttime, clock ticks after boot) follows the ')' that closes the command name
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)


def _age_at_quickmoe_import() -> float | None:
    age = process_age_s()
    return None if age is None else max(age - (time.perf_counter() - _IMPORT_PERF_COUNTER), 0.0)


@dataclass
class StartupReport:
    """Phase durations in seconds (None: not run, e.g. compile before the compile issue), plus facts
    such as bytes loaded and GB/s. `mark(phase)` closes a phase at now; phases are contiguous."""

    phases: dict[str, float | None] = field(default_factory=lambda: {p: None for p in PHASES})
    info: dict[str, Any] = field(default_factory=dict)
    _last: float = field(default_factory=time.perf_counter, repr=False)

    @classmethod
    def from_process_start(cls) -> "StartupReport":
        """A report whose first phase, `interpreter`, is the time from process creation to quickmoe's import,
        and whose clock then runs from that import (so `imports` covers torch and the engine)."""
        report = cls(_last=_IMPORT_PERF_COUNTER)
        report.phases["interpreter"] = _age_at_quickmoe_import()
        return report

    def mark(self, phase: str) -> float:
        """End `phase` now (adding to it if marked before); returns its duration."""
        if phase not in self.phases:
            raise KeyError(f"unknown startup phase {phase!r}; expected one of {list(self.phases)}")
        now = time.perf_counter()
        elapsed = now - self._last
        self._last = now
        self.phases[phase] = (self.phases[phase] or 0.0) + elapsed
        return elapsed

    def skip(self) -> None:
        """Restart the clock without charging the elapsed time to any phase (e.g. time spent idle)."""
        self._last = time.perf_counter()

    @property
    def total(self) -> float:
        return sum(v for v in self.phases.values() if v is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"phases": dict(self.phases), "total": self.total, "info": dict(self.info)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def format(self) -> str:
        """The readable block logged at start-up."""
        lines = ["startup report"]
        for phase, value in self.phases.items():
            shown = "-" if value is None else f"{value:8.3f} s"
            extra = ""
            if phase == "load" and "load_gb_per_s" in self.info:
                extra = f"  ({self.info.get('load_bytes', 0) / 1e9:.2f} GB at {self.info['load_gb_per_s']:.2f} GB/s)"
            lines.append(f"  {phase:<12} {shown}{extra}")
        lines.append(f"  {'total':<12} {self.total:8.3f} s  (from process creation)")
        return "\n".join(lines)

    def log(self) -> None:
        logger.info("%s", self.format())

"""The streaming loader's settings (reader threads, page-locked ring, prefetch), in a module without torch:
the early start sizes its ring and prefetch from them before torch is imported.

Defaults were measured on the H100 machine (docs/benchmarks.md: `scripts/probes/h2d_pipeline_probe.py` in one
process, `scripts/device/loader_sweep.sh` in fresh processes): 16 reader threads read + copy to the GPU
about 1.5x faster than 8; a ring of twice as many buffers as threads keeps readers busy while the copies of
the previous round drain (16 MiB x 32 buffers: 59% of pinned H2D in fresh processes, 32 MiB x 16: 53%).
The ring bounds page-locked host memory to buffers x chunk (512 MiB by default) whatever the model size.
The prefetch reads with 2 threads of 4 MiB reads (the kernel's read-ahead adds to them): on a dropped page
cache that cut process start -> weights ready from 15.8 s to 14.0 s, where 1 thread x 2 MiB or 2 threads
x 1 MiB with read-ahead off reached 14.9 s and 16.2 s in the same session. `QUICKMOE_LOADER` overrides any of them, e.g.
`QUICKMOE_LOADER=threads=8,buffers=8,chunk_mib=64,prefetch_threads=4`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from quickmoe.errors import ConfigError

__all__ = ["LoaderOptions"]

ENV_VAR = "QUICKMOE_LOADER"


@dataclass(frozen=True)
class LoaderOptions:
    """threads: reader threads; buffers x chunk_mib: the host ring (page-locked for a GPU) and the size of
    each read; prefetch_threads x prefetch_read_kib (+ the kernel's read-ahead unless prefetch_readahead=0):
    the early start's page-cache prefetch, i.e. its reads in flight, so the disk share it takes from the
    imports."""

    threads: int = min(16, os.cpu_count() or 4)
    buffers: int = 32
    chunk_mib: int = 16
    prefetch_threads: int = 2
    prefetch_read_kib: int = 4096
    prefetch_readahead: int = 1  # 0: kernel read-ahead off on the prefetch's descriptors

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "prefetch_readahead":
                if value not in (0, 1) or isinstance(value, bool):
                    raise ConfigError(f"loader option {f.name!r} = {value!r}: expected 0 or 1")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"loader option {f.name!r} = {value!r}: expected a positive integer")

    @property
    def chunk_bytes(self) -> int:
        return self.chunk_mib << 20

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> LoaderOptions:
        """The defaults, overridden by `QUICKMOE_LOADER=key=value,...` when set."""
        text = environ.get(ENV_VAR, "").strip()
        if not text:
            return cls()
        valid = [f.name for f in fields(cls)]
        values: dict[str, int] = {}
        for item in text.split(","):
            key, sep, value = item.strip().partition("=")
            if key not in valid or not sep:
                raise ConfigError(f"{ENV_VAR}: {item.strip()!r} is not key=value with a key among {valid}")
            try:
                values[key] = int(value)
            except ValueError:
                raise ConfigError(f"{ENV_VAR}: loader option {key!r} = {value!r}: expected a positive integer"
                                  ) from None
        return cls(**values)

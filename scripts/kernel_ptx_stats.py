"""Counts of telling PTX instructions in the MoE GEMM kernels compiled in this process's Triton cache
(run after the kernels ran): async copies (pipelined loads), wgmma / mma.sync, shared-memory traffic.
PYTHONPATH=src python3 scripts/kernel_ptx_stats.py  (reads ~/.triton/cache or $TRITON_CACHE_DIR)"""

from __future__ import annotations

import json
import os
from pathlib import Path

KEYS = ("wgmma.mma_async", "mma.sync", "ld.global", "cp.async.cg", "cp.async.ca", "cp.async.bulk", "prmt",
        "fma.rn.bf16x2", "st.shared", "ld.shared", "bar.sync")


def main() -> None:
    cache = Path(os.environ.get("TRITON_CACHE_DIR", Path.home() / ".triton" / "cache"))
    for ptx in sorted(cache.glob("*/*.ptx")):
        if "gemm" not in ptx.name:
            continue
        meta = json.loads(next(ptx.parent.glob("*.json")).read_text()) if list(ptx.parent.glob("*.json")) else {}
        text = ptx.read_text()
        counts = {k: text.count(k) for k in KEYS if text.count(k)}
        print(ptx.stem, {k: meta.get(k) for k in ("num_warps", "num_stages", "shared")}, counts)


if __name__ == "__main__":
    main()

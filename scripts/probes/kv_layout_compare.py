"""Compares `quickmoe bench attention --json` runs of KV-cache variants (layout slot-major / head-major, block
size): one row per decode and prefill point, each variant's median time over its runs and SDPA's median (over
every run), then SDPA's time over each variant's (> 1: the variant is faster).

    python scripts/probes/kv_layout_compare.py RUN.json [RUN.json ...]   (each run's variant is in its JSON)
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def main(paths: list[str]) -> None:
    variants: dict[str, None] = {}  # "layout/block size", in order of appearance
    tables = {"decode": defaultdict(lambda: defaultdict(list)), "prefill": defaultdict(lambda: defaultdict(list))}
    for path in paths:
        doc = json.load(open(path))
        variant = f'{doc.get("kv_layout", "slot-major")}/{doc.get("block_size", 16)}'
        variants.setdefault(variant, None)
        for kind, length in (("decode", "context"), ("prefill", "length")):
            for r in doc[kind]:
                by = tables[kind][(r["batch"], r[length], r["window"])]
                by[variant].append(r["quickmoe_s"] * 1e6)
                if r["sdpa_s"]:
                    by["sdpa"].append(r["sdpa_s"] * 1e6)
    names = list(variants)
    for kind, length in (("decode", "context"), ("prefill", "length")):
        print(f"{kind}: median us over runs (runs in brackets); SDPA / variant")
        print(f"| batch | {length} | window | " + " | ".join(names) + " | SDPA | "
              + " | ".join(f"SDPA / {n}" for n in names) + " |")
        print("|" + "---|" * (4 + 2 * len(names)))
        for key, by in sorted(tables[kind].items()):
            med = {n: statistics.median(by[n]) if by[n] else float("nan") for n in names + ["sdpa"]}
            print(f"| {' | '.join(str(k) for k in key)} | "
                  + " | ".join(f"{med[n]:.1f} [{len(by[n])}]" for n in names) + f" | {med['sdpa']:.1f} | "
                  + " | ".join(f"{med['sdpa'] / med[n]:.3f}" for n in names) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])

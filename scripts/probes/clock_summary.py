"""Summarize an nvidia-smi log taken beside a run (hotpath.sh generate): the SM clock, power and throttle reasons
over the samples where the GPU was busy (power above a third of the highest seen), so a run that clocked down
under sustained load shows it.

    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
        --format=csv,noheader -lms 500 > clocks.csv
    python3 scripts/probes/clock_summary.py clocks.csv
"""

from __future__ import annotations

import argparse
import collections
import statistics


def _number(field: str) -> float | None:
    try:
        return float(field.strip().split()[0])
    except (ValueError, IndexError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="nvidia-smi --format=csv,noheader output (the six fields above)")
    args = parser.parse_args()
    rows = []
    with open(args.csv) as f:
        for line in f:
            fields = line.split(",")
            if len(fields) < 6:
                continue
            sm, mem, power, temp = (_number(x) for x in fields[1:5])
            if None in (sm, power):
                continue
            rows.append((sm, mem, power, temp, fields[5].strip()))
    if not rows:
        print(f"{args.csv}: no samples")
        return
    top = max(r[2] for r in rows)
    busy = [r for r in rows if r[2] > top / 3]
    reasons = collections.Counter(r[4] for r in busy)
    print(f"GPU clocks over {len(busy)} busy samples of {len(rows)} (power > {top / 3:.0f} W): SM clock median "
          f"{statistics.median(r[0] for r in busy):.0f} MHz (min {min(r[0] for r in busy):.0f}, max "
          f"{max(r[0] for r in busy):.0f}); power median {statistics.median(r[2] for r in busy):.0f} W (max "
          f"{top:.0f}); temperature max {max(r[3] or 0 for r in busy):.0f} C; throttle reasons "
          + ", ".join(f"{k} x{v}" for k, v in reasons.most_common(4)))


if __name__ == "__main__":
    main()

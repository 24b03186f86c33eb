"""The cyclic collector's full passes (generation 2) during one `quickmoe` command run in this process: when (seconds
since the probe started), how long (ms), and what they collected; the frozen and tracked object counts at the end,
with the commonest types among the tracked, there and at the first full pass after the last freeze (what a full
pass scans once the heap is frozen).

python3 scripts/probes/gc_pauses.py bench generate DIR --num-prompts 64 ... (any `quickmoe` arguments)

A full pass scans every tracked object that is not frozen; the engine queues one step ahead, so a pass longer than a
step leaves the GPU idle (`bench generate`'s idle_ms_total). Compare QUICKMOE_SERVING_GC=normal and =frozen
(startup/gc_pause.py's HeapFreeze).
"""

import collections
import gc
import runpy
import sys
import time

T0 = time.perf_counter()
passes: list[tuple[float, float, int]] = []
_started: list[float] = []
first_after_freeze: list[tuple] = []  # (objects, s since start), then the commonest (type, count)
_freeze_seen = [0]


def _on_collection(phase: str, info: dict) -> None:
    if info["generation"] != 2:
        return
    if phase == "start":
        if gc.get_freeze_count() > _freeze_seen[0]:  # the first full pass after a freeze (frozen objects that die
            # lower the count): what it scans
            _freeze_seen[0] = gc.get_freeze_count()
            types = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
            first_after_freeze[:] = [(len(gc.get_objects()), round(time.perf_counter() - T0, 2)), *types.most_common(8)]
        _started.append(time.perf_counter())
    elif _started:
        t = time.perf_counter()
        passes.append((round(t - T0, 2), round((t - _started.pop()) * 1e3, 1), info["collected"]))


def main() -> None:
    gc.callbacks.append(_on_collection)
    sys.argv = ["quickmoe"] + sys.argv[1:]
    try:
        runpy.run_module("quickmoe", run_name="__main__")
    except SystemExit:
        pass
    finally:
        tracked = gc.get_objects()
        types = collections.Counter(type(o).__qualname__ for o in tracked).most_common(8)
        print(f"full collector passes (s since start, ms, collected): {passes}; frozen {gc.get_freeze_count()}, "
              f"tracked {len(tracked)}, commonest {types}; at the first full pass after the last freeze "
              f"{first_after_freeze}", file=sys.stderr)


if __name__ == "__main__":
    main()

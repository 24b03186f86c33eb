"""The cyclic collector's full passes (generation 2) during one `quickmoe` command run in this process: when (seconds
since the probe started), how long (ms), and what they collected; the frozen and tracked object counts at the end.

python3 scripts/probes/gc_pauses.py bench generate DIR --num-prompts 64 ... (any `quickmoe` arguments)

A full pass scans every tracked object that is not frozen; the engine queues one step ahead, so a pass longer than a
step leaves the GPU idle (`bench generate`'s idle_ms_total). Compare QUICKMOE_SERVING_GC=normal and =frozen
(startup/gc_pause.py's HeapFreeze).
"""

import gc
import runpy
import sys
import time

T0 = time.perf_counter()
passes: list[tuple[float, float, int]] = []
_started: list[float] = []


def _on_collection(phase: str, info: dict) -> None:
    if info["generation"] != 2:
        return
    if phase == "start":
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
        print(f"full collector passes (s since start, ms, collected): {passes}; frozen {gc.get_freeze_count()}, "
              f"tracked {len(gc.get_objects())}", file=sys.stderr)


if __name__ == "__main__":
    main()

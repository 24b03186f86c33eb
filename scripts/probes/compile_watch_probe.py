"""Which Triton kernels compile (or load from the disk cache) while `bench generate` runs, and when.

PYTHONPATH=src python3 scripts/probes/compile_watch_probe.py CHECKPOINT [--num-prompts 256] [--input-len 1000]
                                                             [--output-len 1000]

Installs Triton's JIT hooks (called around every variant a kernel's in-memory cache lacks: a compile, or a load
of the disk cache's entry), then runs `bench generate`'s code with the serving defaults. Prints one line per
event: seconds since the start, milliseconds it took, the kernel and its compile-time constants. Events after the
engine's idle work and inside the timed run are variants no warm-up reached: each stalls the step that meets it.
A probe, not a benchmark.
"""

from __future__ import annotations

import argparse
import time

import triton

from quickmoe.bench.generate import GenerateBenchOptions, run_generate_bench

T0 = time.perf_counter()
_started: dict[str, float] = {}
events: list[tuple[float, float, str]] = []


def _name(kwargs: dict) -> str:
    """The kernel's name, its constexprs and its other specialization (alignment of pointers, ints == 1)."""
    compiled = kwargs["compile"]
    names = kwargs["fn"].jit_function.arg_names
    shown = {names[k[0]] if isinstance(k, tuple) and k and isinstance(k[0], int) else k: v
             for k, v in compiled["constants"].items()}
    return f"{kwargs['fn'].name} warps={compiled['num_warps']} {shown} spec={kwargs['key'][1]}"


def _before(**kwargs) -> bool:
    _started[kwargs["repr"]] = time.perf_counter()
    return False  # False: go on compiling


def _after(**kwargs) -> None:
    now = time.perf_counter()
    events.append((now - T0, (now - _started.pop(kwargs["repr"], now)) * 1e3, _name(kwargs)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--num-prompts", type=int, default=256)
    ap.add_argument("--input-len", type=int, default=1000)
    ap.add_argument("--output-len", type=int, default=1000)
    args = ap.parse_args()
    triton.knobs.runtime.jit_cache_hook = _before
    triton.knobs.runtime.jit_post_compile_hook = _after
    doc = run_generate_bench(GenerateBenchOptions(model=args.model, num_prompts=args.num_prompts,
                                                  input_len=args.input_len, output_len=args.output_len))
    run_s = doc["quickmoe"]["seconds"]
    print(f"timed run {run_s:.2f} s, {doc['quickmoe']['output_tokens_per_s']:.1f} output tok/s; "
          f"idle work {doc['idle_work_before_run']['seconds']:.2f} s")
    for at, ms, name in events:
        print(f"{at:8.2f} s {ms:8.1f} ms  {name}")


if __name__ == "__main__":
    main()

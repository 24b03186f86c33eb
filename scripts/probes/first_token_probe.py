"""Where start-up's last phases go: `capture` (the decode graphs' eager warm-ups) and `first_token` (the first
request after ready), in one fresh process, as `quickmoe generate --max-tokens 1` runs them.

    python scripts/probes/first_token_probe.py MODEL [--mode plain|cprofile|torch|timers] [--top 30] [--device cuda] [--dump PREFIX]

plain:    the startup report, then the first, second and third one-token requests' wall times.
cprofile: cProfile around the LLM's construction and around the first request; the functions with the most
          cumulative and own time in each (--dump: the pstats files too). cProfile slows Python-heavy work
          ~1.5-2x, and it sees the other threads' calls too: read shares, not seconds.
torch:    torch.profiler around the first request: the host ops with the most own time, and the kernels run.
timers:   wall time spent on the main thread during the LLM's construction in Triton's launches (a kernel's first
          call apart), their per-variant work (JITFunction._do_compile: the kernel cache lookup and load;
          CompiledKernel._init_handles: the module load into the context) and F.linear calls (cuBLAS's first ones).
The `quickmoe` command's bytecode cache is enabled first, as `cli.main` does.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--mode", choices=("plain", "cprofile", "torch", "timers"), default="plain")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dump", help="cprofile: also write the two profiles as DUMP_construction.prof and "
                        "DUMP_first_request.prof (pstats files)")
    args = parser.parse_args()
    from quickmoe.startup.bytecode_cache import enable_bytecode_cache

    enable_bytecode_cache()
    t0 = time.perf_counter()
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    print(f"imports {time.perf_counter() - t0:.3f} s")
    params = SamplingParams(max_tokens=1, temperature=0.0)
    timers = _install_timers() if args.mode == "timers" else None
    construct = cProfile.Profile() if args.mode == "cprofile" else None
    t0 = time.perf_counter()
    if construct is not None:
        construct.enable()
    llm = LLM(args.model, device=args.device)
    if construct is not None:
        construct.disable()
    print(f"LLM(...) {time.perf_counter() - t0:.3f} s")
    if timers is not None:
        for name, calls in timers.items():
            calls.sort(reverse=True)
            print(f"timers: {name}: {len(calls)} calls, {sum(calls):.3f} s; slowest "
                  + ", ".join(f"{c * 1e3:.1f}" for c in calls[:8]) + " ms")
        timers.clear()
    llm.startup_report.log = lambda: None  # the report is printed below, once
    first = cProfile.Profile() if args.mode == "cprofile" else None
    prof = None
    if args.mode == "torch":
        import torch

        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                  torch.profiler.ProfilerActivity.CUDA])
        prof.__enter__()
    t0 = time.perf_counter()
    if first is not None:
        first.enable()
    llm.generate("Hello world", params)
    if first is not None:
        first.disable()
    t_first = time.perf_counter() - t0
    if prof is not None:
        prof.__exit__(None, None, None)
    later = []
    for _ in range(2):
        t0 = time.perf_counter()
        llm.generate("Hello world", params)
        later.append(time.perf_counter() - t0)
    print(f"first request {t_first:.3f} s; the next two {later[0]:.3f}, {later[1]:.3f} s")
    print(llm.startup_report.format())
    print("info:", {k: v for k, v in llm.startup_report.info.items() if k in ("cuda_graphs", "triton_cache")})
    for name, profile in (("LLM construction", construct), ("first request", first)):
        if profile is None:
            continue
        if args.dump:
            profile.dump_stats(f"{args.dump}_{name.split()[-1]}.prof")
        for key in ("cumulative", "tottime"):
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats(key).print_stats(args.top)
            print(f"===== {name}, by {key}\n" + "\n".join(out.getvalue().splitlines()[6:]))
    if prof is not None:
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=args.top))
    sys.stdout.flush()


def _install_timers() -> dict[str, list[float]]:
    """Wrap the functions named in the module docstring (mode timers) so that each call's wall time is recorded."""
    import threading

    import torch.nn.functional as F
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    timers: dict[str, list[float]] = {}
    main = threading.main_thread()

    def wrap(owner, attr, name):
        original = getattr(owner, attr)

        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return original(*a, **kw)
            finally:
                if threading.current_thread() is main:
                    timers.setdefault(name, []).append(time.perf_counter() - t0)

        setattr(owner, attr, timed)

    wrap(JITFunction, "_do_compile", "triton _do_compile (cache lookup + load)")
    seen: set[int] = set()
    run = JITFunction.run

    def timed_run(self, *a, **kw):  # a kernel's first call (binder, specialization, ...) apart from the others
        t0 = time.perf_counter()
        try:
            return run(self, *a, **kw)
        finally:
            if threading.current_thread() is main:
                first = id(self) not in seen
                seen.add(id(self))
                timers.setdefault("triton run, first call of a kernel" if first else "triton run, later calls",
                                  []).append(time.perf_counter() - t0)

    JITFunction.run = timed_run
    wrap(CompiledKernel, "_init_handles", "triton _init_handles (module load)")
    wrap(F, "linear", "F.linear")
    return timers


if __name__ == "__main__":
    main()

"""Where the host's time goes in a decode step at a large batch: the engine's step loop under cProfile.

At batch 256 the host takes about as long to run a step (schedule, metadata, graph replay, sampling, then the
previous step's tokens: stop checks, detokenizer, outputs) as the GPU takes to compute one, so the step rate is the
host's. This starts `--batch` requests of `--input-len` random tokens, runs the prefills, then times `--steps`
decode steps without the profiler (wall time per step, and the StepTimer's device time) and the same number under
cProfile, and prints the functions with the most own time and the most cumulative time.

    python3 scripts/probes/host_step_probe.py /tmp/gpt-oss-20b --batch 256 --steps 40
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import random
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--input-len", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()

    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    llm = LLM(args.model, device=args.device)
    engine = llm.engine
    while engine.idle_work():  # every decode graph captured, as a server does once idle
        pass
    rng = random.Random(0)
    params = SamplingParams(max_tokens=3 * args.steps + 64, temperature=0, ignore_eos=True)
    for i in range(args.batch):
        prompt = [rng.randrange(100, min(30000, llm.config.vocab_size)) for _ in range(args.input_len)]
        engine.add_request(f"p{i}", prompt, params)
    started: set[str] = set()
    while len(started) < args.batch:
        started.update(o.request_id for o in engine.step() if o.token_ids)
    for _ in range(8):
        engine.step()
    timer = llm.runner.step_timer
    timer.enabled, timer.keep = True, True
    timer.reset()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        engine.step()
    wall = (time.perf_counter() - t0) / args.steps
    summary = timer.summary()
    timer.enabled = False
    print(f"batch {args.batch}: {1e3 * wall:.3f} ms a step on the wall; device {summary['gpu_ms_median']:.3f} ms "
          f"(median); host {summary['host_queue_ms_median']:.3f} ms to queue a step (median)")
    profiler = cProfile.Profile()
    t0 = time.perf_counter()
    profiler.enable()
    for _ in range(args.steps):
        engine.step()
    profiler.disable()
    print(f"under cProfile: {1e3 * (time.perf_counter() - t0) / args.steps:.3f} ms a step")
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(args.top)
        print(f"--- by {key}, over {args.steps} steps")
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:12000])
    for rid in list(engine._live):
        engine.abort(rid)


if __name__ == "__main__":
    main()

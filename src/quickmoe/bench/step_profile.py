"""`bench generate`'s op-family profiles of steps it drives itself (a torch.profiler trace, CUDA graphs included;
the families and the trace's summary: executor/op_profile.py).

`profile_decode(llm, prompts, steps)` starts the prompts, runs until every one has its first token (the
prefills are done), then profiles `steps` engine steps of pure decode and aborts the requests.
`profile_mixed(llm, prompts, steps)` profiles the steps that carry a chunk of prompt tokens beside decode rows, as
the start of a throughput run does (`bench generate` 256 x 1000 -> 1000 spends about a quarter of its GPU time in
such steps): the prompts start together, and once the first has its first token the next `steps` are profiled
while the later prompts are still in their prefill. The report gives each family's share of the kernels' time and
the GPU time per step, so the next bottleneck shows without opening a trace.
"""

from __future__ import annotations

from collections.abc import Sequence

from quickmoe.engine.step_profile import EngineStepProfile

__all__ = ["family_shares_line", "profile_decode", "profile_mixed", "start_decoding", "start_mixing"]

def start_decoding(engine, prompts: Sequence[Sequence[int]]) -> list[str]:
    """Start `prompts` as requests and step until every one has its first token (the prefills, chunked or not, are
    done) and the step in flight is a decode; returns their ids (abort them when done). Their max_tokens is as
    large as the context allows: with 512 prompts of 1,000 tokens the prefills take 64 steps, and requests that
    stopped after 24 tokens (as they did until 2026-11-30) had left the batch before the profile, which reported a
    decode step "at batch 512" of far fewer rows."""
    from quickmoe.engine.sampling_params import SamplingParams

    ids = [f"profile-{i}" for i in range(len(prompts))]
    room = engine.max_model_len - max(len(p) for p in prompts)
    params = SamplingParams(max_tokens=max(room, 1), temperature=0, ignore_eos=True)
    for rid, prompt in zip(ids, prompts):
        engine.add_request(rid, prompt, params)
    started: set[str] = set()
    while len(started) < len(ids):  # prefills (chunked or not) until every request has its first token
        started.update(o.request_id for o in engine.step() if o.token_ids)
    engine.step()  # the pipeline's step in flight is a decode now
    return ids


def start_mixing(engine, prompts: Sequence[Sequence[int]]) -> list[str]:
    """Start `prompts` as requests and step until the first of them has its first token (its prefill is done, so
    it decodes from then on); returns their ids (abort them when done). While prompt tokens are left after the next
    steps' chunks, each of those steps is mixed: the rows that have their first token decode beside the next chunk
    of the prefill."""
    from quickmoe.engine.sampling_params import SamplingParams

    ids = [f"profile-mixed-{i}" for i in range(len(prompts))]
    room = engine.max_model_len - max(len(p) for p in prompts)
    params = SamplingParams(max_tokens=max(room, 1), temperature=0, ignore_eos=True)
    for rid, prompt in zip(ids, prompts):
        engine.add_request(rid, prompt, params)
    while not any(o.token_ids for o in engine.step()):
        pass
    return ids


def profile_decode(llm, prompts: Sequence[Sequence[int]], steps: int) -> dict | None:
    """Profile `steps` decode steps of `len(prompts)` requests decoding together (see the module docstring).
    Returns {"kind": "decode", "batch_size" (the sequences running when the profile started), "steps",
    "gpu_ms_per_step", "shares": {family: fraction}, "ms_per_step": {family: ms}, "kernels_per_step", "top":
    [(kernel, ms per step), ...]}; None where the device is not CUDA."""
    if llm.runner.device.type != "cuda":
        return None
    ids = start_decoding(llm.engine, prompts)
    batch = len(llm.engine.scheduler.running)
    doc = _profile_steps(llm, ids, steps)
    return {"kind": "decode", "batch_size": batch, **doc}


def profile_mixed(llm, prompts: Sequence[Sequence[int]], steps: int) -> dict | None:
    """Profile `steps` steps that carry prompt tokens beside decode rows (see the module docstring). Returns
    `profile_decode`'s keys with "kind": "mixed", "batch_size": the requests started, and "step_kinds": {kind:
    {"steps", "tokens"}} of the profiled steps (by the step timer: "mixed" only, unless the prompts ran out of
    prompt tokens within the profile); None where the device is not CUDA. `prompts` must share no prefix with
    earlier requests: the prefix cache would skip their prefill (with the throughput run's 64 prompts of 1,000
    tokens every profiled step was a decode step, 2026-12-01)."""
    if llm.runner.device.type != "cuda":
        return None
    ids = start_mixing(llm.engine, prompts)
    timer = llm.runner.step_timer
    was_enabled, timer.enabled = timer.enabled, True  # the profile reads the steps' kinds from it
    try:
        doc = _profile_steps(llm, ids, steps)
    finally:
        timer.enabled = was_enabled
    return {"kind": "mixed", "batch_size": len(ids), **doc}


def _profile_steps(llm, ids: list[str], steps: int) -> dict:
    """Profile the engine's next `steps` steps (engine/step_profile.py: with the step timer on, their kinds too),
    then abort `ids` and run the engine empty."""
    engine = llm.engine
    profile = EngineStepProfile(engine)
    for _ in range(steps):
        engine.step()
        profile.steps += 1
    doc = profile.finish()
    for rid in ids:
        engine.abort(rid)
    while engine.has_unfinished():
        engine.step()
    engine.step()  # collect the last step in flight
    return doc


def family_shares_line(prof: dict) -> str:
    """A profile's kernels per step and each family's ms and share, for one line of a report."""
    shares = ", ".join(f"{f} {prof['ms_per_step'][f]:.3f} ms ({100 * prof['shares'][f]:.0f}%)" for f in prof["shares"])
    return f"{prof['gpu_ms_per_step']:.3f} ms of kernels, {prof['kernels_per_step']:.0f} kernels: {shares}"

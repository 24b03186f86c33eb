"""Where a step's GPU time goes, by op family, from a torch.profiler trace (CUDA graphs included).

`profile_decode(llm, prompts, steps)` starts the prompts, runs until every one has its first token (the
prefills are done), then profiles `steps` engine steps of pure decode and aborts the requests.
`profile_mixed(llm, prompts, steps)` profiles the steps that carry a chunk of prompt tokens beside decode rows, as
the start of a throughput run does (`bench generate` 256 x 1000 -> 1000 spends about a quarter of its GPU time in
such steps): the prompts start together, the first step (prompt tokens only) runs unprofiled, the next `steps` are
profiled while the later prompts are still in their prefill. Each GPU kernel
is put in one family by its name (`op_family`): attention (decode and prefill attention, the RoPE + KV-cache
write), moe (routing, alignment, the grouped GEMMs, the combine), dense (cuBLAS GEMMs: projections, router, LM
head), communication (NCCL collectives of a model spread over GPUs: the all-reduces, the logits' all-gather,
the sampled tokens' broadcast) and other (norms, sampling, copies, the rest). The report gives each family's share
of the kernels' time and the GPU time per step, so the next bottleneck shows without opening a trace.
"""

from __future__ import annotations

import re

__all__ = ["OP_FAMILIES", "op_family", "profile_decode", "profile_mixed", "start_decoding", "start_mixing"]

OP_FAMILIES = ("attention", "moe", "dense", "communication", "other")

_ATTENTION = re.compile(r"_decode_split_kernel|_decode_combine_kernel|_prefill_kernel|_rotary_write_kv_kernel")
_MOE = re.compile(r"_gemm1_swiglu_kernel|_gemm[12]_register_kernel|_moe_gather_permuted_kernel|_gemm2_kernel|"
                  r"_moe_combine_kernel|_align_(count_|plan_|scatter_)?kernel|_route|"
                  r"_quantize_kernel")
_COMMUNICATION = re.compile(r"nccl", re.IGNORECASE)
_DENSE = re.compile(r"gemm|gemv|nvjet|xmma|cutlass|cublas|splitKreduce", re.IGNORECASE)


def op_family(kernel_name: str) -> str:
    """The family of a GPU kernel, from its name (Triton kernels are named after their functions)."""
    if _ATTENTION.search(kernel_name):
        return "attention"
    if _MOE.search(kernel_name):
        return "moe"
    if _COMMUNICATION.search(kernel_name):
        return "communication"
    if _DENSE.search(kernel_name):
        return "dense"
    return "other"


def start_decoding(engine, prompts: list[list[int]]) -> list[str]:
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


def start_mixing(engine, prompts: list[list[int]]) -> list[str]:
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


def profile_decode(llm, prompts: list[list[int]], steps: int) -> dict | None:
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


def profile_mixed(llm, prompts: list[list[int]], steps: int) -> dict | None:
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
    was_enabled, timer.enabled = timer.enabled, True
    timer.reset()
    try:
        doc = _profile_steps(llm, ids, steps, timer)
    finally:
        timer.enabled = was_enabled
    return {"kind": "mixed", "batch_size": len(ids), **doc}


def _profile_steps(llm, ids: list[str], steps: int, timer=None) -> dict:
    """Profile the engine's next `steps` steps, then abort `ids` and run the engine empty. With `timer` (enabled
    and reset by the caller), the profiled steps' kinds and tokens are read from it before the abort."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    engine = llm.engine
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            engine.step()
        torch.cuda.synchronize()
    step_kinds = None
    if timer is not None:
        kinds = (timer.summary() or {}).get("by_kind", {})
        step_kinds = {kind: {"steps": k["steps"], "tokens": k["tokens"]} for kind, k in kinds.items()}
    for rid in ids:
        engine.abort(rid)
    while engine.has_unfinished():
        engine.step()
    engine.step()  # collect the last step in flight
    per_kernel: dict[str, float] = {}
    calls = 0
    for event in prof.key_averages():
        device_us = getattr(event, "self_device_time_total", 0.0) or getattr(event, "self_cuda_time_total", 0.0)
        if device_us <= 0:
            continue
        per_kernel[event.key] = per_kernel.get(event.key, 0.0) + device_us
        calls += event.count
    total_us = sum(per_kernel.values())
    families = {f: 0.0 for f in OP_FAMILIES}
    for name, us in per_kernel.items():
        families[op_family(name)] += us
    top = sorted(per_kernel.items(), key=lambda kv: -kv[1])[:32]
    doc = {"steps": steps, "gpu_ms_per_step": total_us / 1e3 / steps, "kernels_per_step": calls / steps,
           "shares": {f: us / total_us if total_us else 0.0 for f, us in families.items()},
           "ms_per_step": {f: us / 1e3 / steps for f, us in families.items()},
           "top": [(name[:80], us / 1e3 / steps) for name, us in top]}
    if step_kinds is not None:
        doc["step_kinds"] = step_kinds
    return doc

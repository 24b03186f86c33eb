"""Where an engine step's GPU time goes, by op family, from a torch.profiler trace of CUDA kernels (CUDA graphs
included): `StepProfile` wraps a few steps, `op_family` puts each kernel in one family by its name.

Families: attention (decode and prefill attention, the RoPE + KV-cache write), moe (routing, alignment, the grouped
GEMMs, the combine), dense (cuBLAS GEMMs: projections, router, LM head), communication (NCCL collectives of a model
spread over GPUs: the all-reduces, the logits' all-gather, the sampled tokens' broadcast) and other (norms,
sampling, copies, the rest). `bench generate` profiles decode and mixed steps it drives itself
(bench/step_profile.py); a server started with --enable-step-profile profiles its next steps under load on request
(POST /profile_steps, which `bench serve --op-family-steps N` calls).
"""

from __future__ import annotations

import re

__all__ = ["OP_FAMILIES", "StepProfile", "op_family", "summarize_kernels"]

OP_FAMILIES = ("attention", "moe", "dense", "communication", "other")

_ATTENTION = re.compile(r"_decode_split_kernel|_decode_combine_kernel|_prefill_kernel|_rotary_write_kv_kernel")
_MOE = re.compile(r"_gemm1_swiglu_kernel|_gemm[12]_register_kernel|_moe_gather_permuted_kernel|_gemm2_kernel|"
                  r"_moe_gemv[12]_kernel|"
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


def summarize_kernels(per_kernel_us: dict[str, float], calls: int, steps: int) -> dict:
    """A profile's summary from each kernel's device time (us) over `steps` steps and the kernels' launch count:
    {"steps", "gpu_ms_per_step", "kernels_per_step", "shares": {family: fraction}, "ms_per_step": {family: ms},
    "top": [(kernel, ms per step), ...] (the 32 longest)}."""
    total_us = sum(per_kernel_us.values())
    families = {f: 0.0 for f in OP_FAMILIES}
    for name, us in per_kernel_us.items():
        families[op_family(name)] += us
    top = sorted(per_kernel_us.items(), key=lambda kv: -kv[1])[:32]
    return {"steps": steps, "gpu_ms_per_step": total_us / 1e3 / steps, "kernels_per_step": calls / steps,
            "shares": {f: us / total_us if total_us else 0.0 for f, us in families.items()},
            "ms_per_step": {f: us / 1e3 / steps for f, us in families.items()},
            "top": [(name[:80], us / 1e3 / steps) for name, us in top]}


class StepProfile:
    """A torch.profiler trace of the CUDA kernels that run between `start()` and `stop(steps)` (both synchronize
    the device, so the trace holds exactly the kernels of the steps launched in between); `stop` returns
    `summarize_kernels`' dict."""

    def __init__(self) -> None:
        self._prof = None

    def start(self) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize()
        # one cycle: acc_events only spares the server's log torch's warning that events are cleared per cycle
        self._prof = profile(activities=[ProfilerActivity.CUDA], acc_events=True)
        self._prof.__enter__()

    def stop(self, steps: int) -> dict:
        import torch

        assert self._prof is not None and steps > 0
        torch.cuda.synchronize()
        prof, self._prof = self._prof, None
        prof.__exit__(None, None, None)
        per_kernel: dict[str, float] = {}
        calls = 0
        for event in prof.key_averages():
            device_us = getattr(event, "self_device_time_total", 0.0) or getattr(event, "self_cuda_time_total", 0.0)
            if device_us <= 0:
                continue
            per_kernel[event.key] = per_kernel.get(event.key, 0.0) + device_us
            calls += event.count
        return summarize_kernels(per_kernel, calls, steps)

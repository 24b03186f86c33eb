"""Where the PDL instructions sit in the SASS of the kernels that trigger early or load weights before their wait
(kernels/pdl.py): compiled for Hopper (sm_90) on a machine without a GPU.

PYTHONPATH=src python3 scripts/probes/pdl_preload_sass_probe.py [--kernels router,norm,quantizer]

- router: `router._router_route_kernel` at Qwen3-30B-A3B's launch (128 experts, H 2048: one 128-column step a
  program, 16 programs, 8 warps) and gpt-oss-20b's (32 experts, H 2880: two 256-column steps, 4 warps). The
  weight tile's global loads should come before ACQBULK (griddepcontrol.wait), the activations' after it.
- norm: `rms_norm._rms_norm_kernel` (hidden 2048, FP8 rows out, 8 warps) with EARLY: where the trigger
  (griddepcontrol.launch_dependents) lands against the wait.
- quantizer: `fp8_quant._quantize_kernel` at one token's 32 groups (o_proj's input) with EARLY.

(The dense FP8 GEMV: `fp8_gemv_sass_probe.py --gemv dense --preload N`.) Nothing runs; it reads what ptxas made
(`sass_probe.disassemble`) and prints, per kernel, the registers, the instruction index of the wait and of the
trigger, and the global loads before and after the wait.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile for real, not for the interpreter
sys.path.insert(0, str(Path(__file__).resolve().parent))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

from quickmoe.kernels import fp8_quant, rms_norm, router  # noqa: E402
from sass_probe import OPCODE, disassemble  # noqa: E402


def _compile(kernel, signature: dict, constexprs: dict, warps: int, divisible: tuple[str, ...] = ()):
    """`divisible`: the integer arguments the launch specializes as multiples of 16 (row strides)."""
    signature = dict(signature, **{name: "constexpr" for name in constexprs})
    names = list(kernel.arg_names)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n, kind in signature.items()
             if kind.startswith("*") or n in divisible}
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})


def router_kernel(experts: int, hidden: int, block_h: int, split: int, warps: int):
    h_per_split = -(-(-(-hidden // split)) // block_h) * block_h
    signature = {"hidden_ptr": "*bf16", "weight_ptr": "*bf16", "bias_ptr": "*bf16", "partial_ptr": "*fp32",
                 "counter_ptr": "*i32", "weights_ptr": "*fp32", "ids_ptr": "*i32", "valid_ptr": "*i32",
                 "num_tokens": "i32", "stride_t": "i32", "stride_e": "i32"}
    constexprs = dict(H=hidden, E=experts, HAS_BIAS=experts == 32, HAS_VALID=False, TOP_K=8 if experts == 128 else 4,
                      BLOCK_T=16,
                      BLOCK_E=max(16, triton.next_power_of_2(experts)), BLOCK_H=block_h, H_PER_SPLIT=h_per_split,
                      SPLIT=-(-hidden // h_per_split), BLOCK_K=8 if experts == 128 else 4,
                      SOFTMAX_FIRST=experts == 128, RENORMALIZE=experts == 128, DOT_DTYPE=tl.bfloat16,
                      OUT_DTYPE=tl.bfloat16, PRECISION="tf32", PDL=True)
    return _compile(router._router_route_kernel, signature, constexprs, warps, ("stride_t", "stride_e"))


def norm_kernel(hidden: int):
    signature = {"x_ptr": "*bf16", "res_ptr": "*bf16", "w_ptr": "*bf16", "out_ptr": "*bf16", "sum_ptr": "*bf16",
                 "q_ptr": "*u8", "s_ptr": "*fp32", "stride_x": "i32", "stride_r": "i32", "hidden": "i32",
                 "eps": "fp32"}
    block = triton.next_power_of_2(hidden)
    constexprs = dict(HAS_RESIDUAL=True, PARTS=0, BLOCK=block, FP8_OUT=True, HW_ROUND=True, EARLY=True, PDL=True)
    return _compile(rms_norm._rms_norm_kernel, signature, constexprs, rms_norm._num_warps(block),
                    ("stride_x", "stride_r", "hidden"))


def quantizer_kernel(k: int):
    rows, per_program, warps = fp8_quant.launch_tile(1, k // 128)
    signature = {"x_ptr": "*bf16", "q_ptr": "*u8", "s_ptr": "*fp32", "T": "i32", "K": "i32", "G": "i32",
                 "stride_t": "i32", "stride_k": "i32"}
    constexprs = dict(GROUP=128, GROUPS=per_program, ROWS=rows, HW_ROUND=True, EARLY=True)
    return _compile(fp8_quant._quantize_kernel, signature, constexprs, warps, ("K", "stride_t"))


def report(name: str, compiled) -> None:
    usage, sass = disassemble(compiled)
    ops = [m.group(2) for m in map(OPCODE.match, sass.splitlines()) if m]
    wait = [i for i, op in enumerate(ops) if op.startswith("ACQBULK")]
    trigger = [i for i, op in enumerate(ops) if op.startswith("PREEXIT")]
    loads = [i for i, op in enumerate(ops) if op.startswith("LDG")]
    before = [i for i in loads if wait and i < wait[0]]
    print(f"{name}: {usage.split(' SHARED')[0]}, {len(ops)} instructions; wait (ACQBULK) at {wait or 'none'}, "
          f"trigger (PREEXIT) at {trigger or 'none'}; global loads before the wait {len(before)} "
          f"({' '.join(f'{ops[i]}@{i}' for i in before)}), after it {len(loads) - len(before)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", default="router,norm,quantizer")
    args = parser.parse_args()
    for name in args.kernels.split(","):
        if name == "router":
            report("router, Qwen3 (128 x 2048, 16 programs, 8 warps)", router_kernel(128, 2048, 128, 16, 8))
            report("router, gpt-oss-20b (32 x 2880, 4 warps)", router_kernel(32, 2880, 256, 8, 4))
        elif name == "norm":
            report("RMSNorm + FP8 rows, hidden 2048, EARLY", norm_kernel(2048))
        elif name == "quantizer":
            report("FP8 quantizer, one token of 4096 columns, EARLY", quantizer_kernel(4096))
        else:
            raise SystemExit(f"--kernels: unknown kernel {name!r}; expected router, norm, quantizer")


if __name__ == "__main__":
    main()

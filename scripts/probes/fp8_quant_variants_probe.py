"""Variants of the FP8 activation quantizer (`kernels/fp8_quant.py`) at the MoE's prefill sizes, on the GPU: the
committed kernel against variants that each change one thing, in CUDA graphs, with every variant's bits checked
against the torch reference on every input (a probe: the winner is then built into the kernel and measured with
`quickmoe bench moe`).

Variants:
- `committed`: the kernel as it is now (the divisor tiles, an IEEE division, the conversion rounding on the GPU).
- `old`: the kernel before 2026-11-29 (seventh session): tiles of the next power of two of groups, masked past
  the row, and the e4m3 rounding done in float32 (floor, tie test, sign) before an exact conversion.
- `divisor`: as old, but a program takes the largest power of two of groups that divides a row's groups (768
  columns = 6 groups: 2 a program, where the old tile took 8 and masked 2).
- `recip`: divisor, and x / scale as q0 = x * y, q = fma(x - q0 * scale, y, q0) with y = 1 / scale correctly
  rounded once per group (Markstein: a faithful q0 and a correctly rounded y give the correctly rounded quotient,
  no underflow: quotients under 2^-10 round to zero in e4m3 either way), instead of an IEEE division per value.
- `hwround`: recip, with the e4m3 rounding by the conversion itself (cvt.rn.satfinite: ties to even).

PYTHONPATH=src python3 scripts/probes/fp8_quant_variants_probe.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl
from fp8_quant_probe import graph_us  # the sibling probe's CUDA-graph timing (scripts/probes is sys.path[0])

from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group, quantize_fp8_per_token_group_ref

SHAPES = {  # name: (rows, columns) of the activations each MoE quantizes at T = 8,192 (and 2,048)
    "qwen3 x 8192": (8192, 2048), "qwen3 inter 8192": (65536, 768),
    "mixtral x 8192": (8192, 4096), "mixtral inter 8192": (16384, 14336),
    "qwen3 inter 2048": (16384, 768), "mixtral inter 2048": (4096, 14336),
}


@triton.jit
def _variant_kernel(x_ptr, q_ptr, s_ptr, T, K, G, stride_t, GROUP: tl.constexpr, GROUPS: tl.constexpr,
                    ROWS: tl.constexpr, RECIP: tl.constexpr, HW_ROUND: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)  # [R]
    groups = tl.program_id(1) * GROUPS + tl.arange(0, GROUPS)  # [Gp]
    cols = groups[:, None] * GROUP + tl.arange(0, GROUP)[None, :]  # [Gp, GROUP]
    row_ok = rows < T
    ok = row_ok[:, None, None] & (cols < K)[None, :, :]
    x = tl.load(x_ptr + rows.to(tl.int64)[:, None, None] * stride_t + cols[None, :, :], mask=ok,
                other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=2), 1e-10) / 448.0  # [R, Gp]
    if RECIP:
        y = tl.math.div_rn(tl.zeros_like(scale) + 1.0, scale)[:, :, None]  # [R, Gp, 1] correctly rounded 1 / scale
        q0 = x * y
        v = tl.fma(tl.fma(-q0, scale[:, :, None], x), y, q0)  # the residual x - q0 * scale is exact
    else:
        v = tl.math.div_rn(x, tl.zeros_like(x) + scale[:, :, None])
    v = tl.minimum(tl.maximum(v, -448.0), 448.0)
    if HW_ROUND:
        bits = v.to(tl.float8e4nv, fp_downcast_rounding="rtne").to(tl.uint8, bitcast=True)
    else:
        mag = tl.abs(v)
        exp = tl.maximum(((tl.maximum(mag, 1e-30).to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127, -6)
        ulp = ((exp - 3 + 127) << 23).to(tl.float32, bitcast=True)
        units = mag / ulp
        rounded = tl.floor(units + 0.5)
        tie_to_odd = ((rounded - units) == 0.5) & ((rounded.to(tl.int32) & 1) == 1)
        rounded = tl.where(tie_to_odd, rounded - 1.0, rounded)
        q = tl.where(v < 0, -rounded * ulp, rounded * ulp)
        sign = ((v.to(tl.uint32, bitcast=True) >> 31) << 7).to(tl.uint8)
        bits = q.to(tl.float8e4nv).to(tl.uint8, bitcast=True) | sign
    tl.store(q_ptr + rows.to(tl.int64)[:, None, None] * K + cols[None, :, :], bits, mask=ok)
    tl.store(s_ptr + rows[:, None] * G + groups[None, :], scale, mask=row_ok[:, None] & (groups < G)[None, :])


def _divisor_tile(groups: int, values: int) -> tuple[int, int]:
    per = min(groups & -groups, max(1, min(values, 2048) // 128))
    return max(1, values // (per * 128)), per


def _old_tile(groups: int, values: int) -> tuple[int, int]:
    per = min(1 << max(0, groups - 1).bit_length(), max(1, min(values, 2048) // 128))
    return max(1, values // (per * 128)), per


def variant(name: str):
    def run(x: torch.Tensor):
        t, k = x.shape
        g = -(-k // 128)
        q = torch.empty(t, k, dtype=torch.uint8, device=x.device)
        s = torch.empty(t, g, dtype=torch.float32, device=x.device)
        rows, per = (_old_tile if name == "old" else _divisor_tile)(g, 4096)  # prefill sizes: 4,096-value tiles
        _variant_kernel[(triton.cdiv(t, rows), triton.cdiv(g, per))](
            x, q, s, t, k, g, x.stride(0), GROUP=128, GROUPS=per, ROWS=rows,
            RECIP=name in ("recip", "hwround"), HW_ROUND=name == "hwround", num_warps=4)
        return q.view(torch.float8_e4m3fn), s
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json")
    args = ap.parse_args()
    names = ["committed", "old", "divisor", "recip", "hwround"]
    runs = {"committed": quantize_fp8_per_token_group, **{n: variant(n) for n in names[1:]}}
    g = torch.Generator(device="cuda").manual_seed(0)
    results = []
    print("| shape | rows x cols | " + " | ".join(f"{n} us" for n in names) + " | bits equal |")
    for label, (t, k) in SHAPES.items():
        # rows of very different magnitudes, and values near e4m3 rounding midpoints: x = scale * (m + 1/2) ulp
        x = torch.randn(t, k, device="cuda", generator=g) * torch.exp(torch.randn(t, 1, device="cuda", generator=g) * 3)
        x = x.to(torch.bfloat16)
        q_ref, s_ref = quantize_fp8_per_token_group_ref(x)
        equal, times = {}, {}
        for n in names:
            q, s = runs[n](x)
            equal[n] = torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(s, s_ref)
            times[n] = graph_us(lambda n=n: runs[n](x))
        gb = (x.numel() * 3 + s_ref.numel() * 4) / 1e9
        print(f"| {label} | {t} x {k} | " + " | ".join(f"{times[n]:.1f} ({gb / times[n] * 1e6:.0f} GB/s)"
                                                       for n in names)
              + " | " + ", ".join(n for n in names if not equal[n]) + (" all" if all(equal.values()) else "")
              + " |", flush=True)
        results.append({"shape": label, "rows": t, "cols": k, "us": times, "bits_equal": equal})
        del x, q_ref, s_ref
    # quotients within a few float32 ulps of e4m3 rounding midpoints (float32 inputs, random signs)
    t, k = 4096, 1024
    values = torch.arange(0, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float().cuda()  # 0 .. 448
    mids = (values[:-1] + values[1:]) / 2  # [126]
    scale = torch.exp(torch.randn(t, 1, device="cuda", generator=g) * 4) / 448.0
    x = mids[torch.randint(0, 126, (t, k), device="cuda", generator=g)] * scale
    for _ in range(2):  # 0-2 float32 steps up or down
        step = torch.randint(-1, 2, (t, k), device="cuda", generator=g).float()
        x = torch.nextafter(x, x + step * x.abs().clamp(min=1e-30))
    x = x * torch.where(torch.rand(t, k, device="cuda", generator=g) < 0.5, -1.0, 1.0)
    x[:, 0] = 448.0 * scale[:, 0]
    q_ref, s_ref = quantize_fp8_per_token_group_ref(x)
    bad = [n for n in names if not torch.equal(runs[n](x)[0].view(torch.uint8), q_ref.view(torch.uint8))]
    print(f"near-midpoint float32 inputs {t} x {k}: bits differ in: {bad or 'none'}", flush=True)
    results.append({"shape": "midpoints", "differ": bad})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

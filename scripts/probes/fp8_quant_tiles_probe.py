"""Which launches of the FP8 activation quantizer compute wrong bits on the GPU?

PYTHONPATH=src python3 scripts/probes/fp8_quant_tiles_probe.py [--device cuda] [--no-tiles] [--json PATH]

On the H200 (docs/benchmarks.md, 2026-11-28 sixth session) `fused_moe` with FP8 experts gave relative errors of
3.5-6.4 for some token counts whatever the GEMMs' configs, and the wrong GEMM was always the one whose activations
came from a quantizer launch of [1, 2, 128] tiles on 4 warps (two groups of one row a program, 2 values a thread).
This compares the kernels' bits with the torch references: (a) `quantize_fp8_per_token_group` over a grid of shapes
in bf16 and float32 (its launch rule, `launch_tile`, picks the tile); (b) unless --no-tiles, each tile shape
(ROWS x GROUPS x 128) and warp count launched directly, so that a launch rule can be chosen from what passes;
(c) `quantize_mxfp8` over a few shapes and (d) its kernel at each BLOCK_K and warp count. Prints what is wrong;
times nothing (`fp8_quant_probe.py` times the FP8 quantizer).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

if os.environ.get("PYTHONPATH") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from quickmoe.kernels import fp8_quant, mxfp8_quant
from quickmoe.kernels.fp8_quant import launch_tile, quantize_fp8_per_token_group, quantize_fp8_per_token_group_ref


def _same(q, s, x) -> bool:
    q_ref, s_ref = quantize_fp8_per_token_group_ref(x)
    return torch.equal(s, s_ref) and torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))


def _direct(x: torch.Tensor, rows: int, per_program: int, warps: int) -> tuple[torch.Tensor, torch.Tensor]:
    num_rows, k = x.shape
    groups = -(-k // 128)
    q = torch.empty(num_rows, k, dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty(num_rows, groups, dtype=torch.float32, device=x.device)
    grid = (-(-num_rows // rows), -(-groups // per_program))
    fp8_quant._quantize_kernel[grid](x, q.view(torch.uint8), s, num_rows, k, groups, x.stride(0), x.stride(1),
                                     GROUP=128, GROUPS=per_program, ROWS=rows, HW_ROUND=x.device.type == "cuda",
                                     EARLY=False, num_warps=warps)
    return q, s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json")
    ap.add_argument("--no-tiles", action="store_true",
                    help="skip (b), the direct launches of every tile and warp count")
    args = ap.parse_args()
    device = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    results = {"shapes": [], "tiles": []}
    for dtype in (torch.bfloat16, torch.float32):
        for num_rows in (1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 1024):
            for k in (128, 256, 384, 768, 2048, 2880, 4096, 14336):
                x = torch.randn(num_rows, k, generator=g).to(dtype).to(device)
                ok = _same(*quantize_fp8_per_token_group(x), x)
                results["shapes"].append({"dtype": str(dtype), "rows": num_rows, "k": k, "ok": ok})
                if not ok:
                    print(f"wrong: {dtype} [{num_rows}, {k}]", flush=True)
    print(f"shapes: {sum(r['ok'] for r in results['shapes'])} of {len(results['shapes'])} right", flush=True)
    for dtype in () if args.no_tiles else (torch.bfloat16, torch.float32):
        x = torch.randn(37, 4096, generator=g).to(dtype).to(device)
        for rows in (1, 2, 4, 8, 16, 32):
            for per_program in (1, 2, 4, 8, 16):
                if rows * per_program * 128 > 8192:
                    continue
                line = []
                for warps in (1, 2, 4, 8):
                    ok = _same(*_direct(x, rows, per_program, warps), x)
                    results["tiles"].append({"dtype": str(dtype), "rows": rows, "groups": per_program, "warps": warps,
                                             "ok": ok})
                    line.append(f"w{warps} {'ok' if ok else 'WRONG'}")
                print(f"{dtype} tile [{rows}, {per_program}, 128]: " + "  ".join(line), flush=True)
    # the MXFP8 quantizer (gpt-oss's mxfp8 activations): [BLOCK_K] values a program on 4 warps, BLOCK_K <= 256
    for num_rows, k in ((1, 32), (3, 64), (5, 128), (8, 256), (16, 2880), (37, 4096)):
        x = torch.randn(num_rows, k, generator=g).to(torch.bfloat16).to(device)
        q, s = mxfp8_quant.quantize_mxfp8(x)
        q_ref, s_ref = mxfp8_quant.quantize_mxfp8_ref(x)
        ok = torch.equal(s, s_ref) and torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
        results["mxfp8"] = results.get("mxfp8", []) + [{"rows": num_rows, "k": k, "ok": ok}]
        print(f"mxfp8 [{num_rows}, {k}]: {'ok' if ok else 'WRONG'}", flush=True)
    # (d) the MXFP8 quantizer's launches: BLOCK_K values of one row a program, each warp count
    for num_rows, k in ((37, 4096), (16, 2880), (8, 256), (64, 1024), (3, 128)):
        x = torch.randn(num_rows, k, generator=g).to(torch.bfloat16).to(device)
        q_ref, s_ref = mxfp8_quant.quantize_mxfp8_ref(x)
        padded = q_ref.shape[1]
        line = []
        for block_k in (32, 64, 128, 256):
            if block_k > padded:
                continue
            for warps in (1, 2, 4, 8):
                q = torch.empty_like(q_ref)
                s = torch.empty_like(s_ref)
                mxfp8_quant._quantize_kernel[(num_rows, -(-padded // block_k))](
                    x, q.view(torch.uint8), s, k, padded, x.stride(0), x.stride(1), BLOCK_K=block_k, num_warps=warps)
                ok_q = torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
                ok = ok_q and torch.equal(s, s_ref)
                results.setdefault("mxfp8_tiles", []).append({"rows": num_rows, "k": k, "block_k": block_k,
                                                             "warps": warps, "ok": ok})
                if not ok:
                    bad = (q.view(torch.uint8) != q_ref.view(torch.uint8)).nonzero()
                    what = "scales" if ok_q else f"{bad.shape[0]} values, first {bad[:2].tolist()}"
                    line.append(f"bk{block_k} w{warps} WRONG ({what})")
        print(f"mxfp8 direct [{num_rows}, {k}]: " + ("; ".join(line) if line else "all right"), flush=True)
    print("launch_tile (rows, groups, warps) at the failing shapes:",
          {f"{n}x{k}": launch_tile(n, -(-k // 128)) for n, k in ((8, 14336), (16, 4096), (128, 768), (32, 2048))})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

"""Which FP8 MoE decode tiles compute wrong results on the GPU, and in which rows?

PYTHONPATH=src python3 scripts/probes/fp8_decode_tile_probe.py [--shapes qwen3-30b-a3b,mixtral-8x7b]
    [--tokens 1,2,4,16] [--device cuda] [--json PATH]

On the H200 (docs/benchmarks.md, 2026-11-28 fifth session) the tuner's FP8 decode winners (GEMM 1 with 32 columns
on 2 warps in the plain orientation, GEMM 2 in the transposed one) gave relative errors of 3.6-3.8 against the
float64 reference at T = 16, while T = 1 (one row a tile) passed; Triton's interpreter computes them right. (This
probe then found every tile right, sixth session: the fault was the activations' quantizer, whose launch at those
sizes gave its threads 2 values each; see `fp8_quant.launch_tile` and `fp8_quant_tiles_probe.py`.) This
times nothing: for each shape, T, GEMM and decode tile of `scripts/tune_moe.py`'s small grid it compares the
output with the fallback config's on the same inputs (the candidate check the tuner now makes) and, for a wrong
tile, prints which rows of their M tile (0-15: position among the tile's assignments) and which output columns
(mod 64) are off, so that the fault can be told apart: rows past the first, a half of the mma's 16 rows, a column
group, or everything.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: the tuner's helpers
from tune_moe import gemm1_candidates, gemm2_candidates, gemm_runs, make_inputs, rel_err

from quickmoe.bench.moe_experts import SHAPES, make_experts
from quickmoe.kernels import moe_configs
from quickmoe.kernels.moe_align import moe_align


def _wrong_rows(got: torch.Tensor, want: torch.Tensor, align) -> dict:
    """Which assignment rows are off (relative error > 1e-2 per row), as positions within their M tile, and which
    output columns mod 64 are off in those rows."""
    per_row = (got.float() - want.float()).norm(dim=1) / want.float().norm(dim=1).clamp_min(1e-30)  # [A]
    bad = (per_row > 1e-2).nonzero().flatten()
    sorted_ids = align.sorted_ids.cpu()
    position = torch.full((got.shape[0],), -1, dtype=torch.long)
    slots = (sorted_ids < got.shape[0]).nonzero().flatten()
    position[sorted_ids[slots].long()] = slots % align.block_m  # assignment -> its row within its tile
    cols = ((got.float() - want.float()).abs() > 1e-2 * want.float().abs().amax()).any(dim=0).nonzero().flatten()
    return {"rows": int(bad.numel()), "of": int(got.shape[0]),
            "tile_positions": sorted({int(p) for p in position[bad.cpu()].tolist()}),
            "columns_mod_64": sorted({int(c) % 64 for c in cols.cpu().tolist()})[:16]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="qwen3-30b-a3b,mixtral-8x7b")
    ap.add_argument("--tokens", default="1,2,4,16")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test under TRITON_INTERPRET=1 (--shapes tiny-silu)")
    ap.add_argument("--json")
    args = ap.parse_args()
    device = torch.device(args.device)
    results = []
    for shape in args.shapes.split(","):
        spec = SHAPES[shape]
        g = torch.Generator().manual_seed(0)
        ex = make_experts(spec, "fp8", device, g)
        for tokens in (int(t) for t in args.tokens.split(",")):
            inputs = make_inputs(ex, spec.top_k, tokens, g)
            ids_sets = [ids for _, ids in inputs[1]]
            fallback = moe_configs._fallback(tokens)
            fb_aligns = [moe_align(ids, spec.experts, fallback.block_m) for ids in ids_sets]
            fb1, fb2 = gemm_runs(ex, spec.top_k, inputs, fb_aligns)
            refs = (fb1(0, fallback).clone(), fb2(0, fallback).clone())
            aligns = [moe_align(ids, spec.experts, 16) for ids in ids_sets]
            gemm1, gemm2 = gemm_runs(ex, spec.top_k, inputs, aligns)
            for which, run, candidates in ((1, gemm1, gemm1_candidates(16, "fp8")),
                                           (2, gemm2, gemm2_candidates(16, "fp8"))):
                for config in candidates:
                    got = run(0, config)
                    err = rel_err(got, refs[which - 1])
                    row = {"shape": shape, "tokens": tokens, "gemm": which, "block_n": config.block_n,
                           "warps": config.num_warps, "swap_ab": config.swap_ab, "rel_err": err}
                    if not err < 1e-2:
                        row.update(_wrong_rows(got, refs[which - 1], aligns[0]))
                    results.append(row)
                    print(f"{shape} T={tokens} gemm{which} n{config.block_n} w{config.num_warps} "
                          f"swap{int(config.swap_ab)}: rel err {err:.3g}"
                          + ("" if err < 1e-2 else f"  wrong rows {row['rows']}/{row['of']} at tile positions "
                             f"{row['tile_positions']}, columns mod 64 {row['columns_mod_64']}"), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

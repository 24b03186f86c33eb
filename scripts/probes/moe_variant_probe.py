"""The MoE GEMMs' kernel variants x launch configs at decode-sized T, gpt-oss-20b shapes, on the GPU.

PYTHONPATH=src python3 scripts/probes/moe_variant_probe.py [--tokens 1,4,16,64,256] [--json PATH]
PYTHONPATH=src python3 scripts/probes/moe_variant_probe.py --profile-once   # under ncu --profile-from-start off

A variant is the MoE GEMMs' modules (`kernels/moe_tiles.py`, `moe_gemm1_kernel.py`, `moe_gemm2_kernel.py`,
`moe_gemm.py`) with text replacements (VARIANTS below), written to temporary modules that import each other, so
several kernel versions are timed side by side in one process on the same inputs (METHOD.md: ratios in one
run). Each (variant, config) GEMM is timed alone in a CUDA graph of 16 calls over rotating random inputs whose
experts outgrow the L2 cache, median of 5 replays (`scripts/tune_moe.py`'s timer), and its output is checked
against the first variant's at the same config. A probe, not a benchmark: the figures that count come from
`quickmoe bench`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: the tuner's timer
from tune_moe import SETS, graph_seconds

from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
from quickmoe.kernels.moe_align import moe_align
from quickmoe.kernels.moe_configs import MoEKernelConfig
from quickmoe.kernels.routing import route_ref

KERNELS = Path(__file__).resolve().parents[2] / "src" / "quickmoe" / "kernels"
MODULES = ("moe_tiles", "moe_gemm1_kernel", "moe_gemm2_kernel", "moe_gemm")  # each imports only those before it

# name -> [(module, old, new)] replacements of the modules' text ([] = the work tree's kernels)
VARIANTS: dict[str, list[tuple[str, str, str]]] = {
    "tree": [],
    # the E8M0 scales of every tile loaded one K step ahead into registers (as at e17c347 for all tiles)
    "prefetch": [("moe_tiles", "SCALES_AHEAD_BLOCK_M = tl.constexpr(64)", "SCALES_AHEAD_BLOCK_M = tl.constexpr(16)")],
    # the E8M0 scales of every tile loaded in the K step (through the software pipeline)
    "in-step": [("moe_tiles", "SCALES_AHEAD_BLOCK_M = tl.constexpr(64)",
                 "SCALES_AHEAD_BLOCK_M = tl.constexpr(1024)")],
}

# (name, block_n, block_k, num_warps, num_stages, swap_ab): one list for both GEMMs (GEMM 1 caps block_n at the
# gate/up group, 64)
CONFIGS = [
    ("n64", 64, 256, 4, 3, False),
    ("n128", 128, 256, 4, 3, False),
    ("n32", 32, 256, 4, 3, False),
    ("n64w2", 64, 256, 2, 3, False),
    ("swap32w2", 32, 256, 2, 3, True),
    ("swap64w2", 64, 256, 2, 3, True),
    ("swap64w4", 64, 256, 4, 3, True),
    ("swap64w2s4", 64, 256, 2, 4, True),
    ("swap64k128w2s4", 64, 128, 2, 4, True),
    ("swap128w4", 128, 256, 4, 3, True),
    ("swap128k128w2", 128, 128, 2, 3, True),  # gemm 1 caps block_n at 64: T=256's tuned pair of 2026-11-24
]
# prefill-sized T (--prefill): the tuned H100 choices (block_m, block_n, block_k, num_warps, num_stages, group_m)
PREFILL = {1024: (64, 128, 64, 4, 3, 1), 4096: (128, 128, 64, 8, 3, 1), 8192: (128, 128, 64, 8, 3, 1)}


def load_variant(name: str, edits: list[tuple[str, str, str]], tmp: Path):
    """The variant's copy of moe_gemm (its kernels and tiles copied too, importing each other's copies)."""
    suffix = name.replace("-", "_")
    module = None
    for base in MODULES:
        text = (KERNELS / f"{base}.py").read_text()
        for target, old, new in edits:
            if target == base:
                if old not in text:
                    raise SystemExit(f"variant {name}: text not found in {base}.py: {old[:60]!r}")
                text = text.replace(old, new)
        for dep in MODULES[:MODULES.index(base)]:
            text = text.replace(f"quickmoe.kernels.{dep} import", f"{dep}_{suffix} import")
        path = tmp / f"{base}_{suffix}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(f"{base}_{suffix}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


def sustained(rows: list[dict], seconds: float) -> None:
    """Each row's fn in a CUDA graph of 16 calls; turns of `seconds` per row, twice round; the median replay
    of each turn, per call, and the SM clock at its end (nvidia-smi)."""
    import subprocess
    import time

    graphs = []
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for row in rows:
            for i in range(SETS):
                row["fn"](i)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                for c in range(16):
                    row["fn"](c % SETS)
            graphs.append(graph)
    torch.cuda.current_stream().wait_stream(stream)
    for turn in range(2):
        for row, graph in zip(rows, graphs):
            times = []
            end_at = time.perf_counter() + seconds
            while time.perf_counter() < end_at:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                graph.replay()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e3 / 16)
            clock = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader"],
                                   capture_output=True, text=True, check=False).stdout.strip()
            print(f"turn {turn} T={row['tokens']} {row['variant']:10s} {row['config']:16s} gemm1 + gemm2 "
                  f"{statistics.median(times):7.1f} us (median of {len(times)} replays; last quarter "
                  f"{statistics.median(times[-len(times) // 4:]):7.1f}) | {clock}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", default="1,2,4,8,16,64,256")
    parser.add_argument("--configs", default=",".join(c[0] for c in CONFIGS))
    parser.add_argument("--variants", default="prefetch,in-step",
                        help="of: " + ", ".join(VARIANTS) + " (the work tree is one of the other two per tile size)")
    parser.add_argument("--prefill", action="store_true", help="T = 1024, 4096, 8192 at their tuned configs")
    parser.add_argument("--sustain", type=float, default=0.0,
                        help="seconds: instead of short timings, replay gemm 1 + gemm 2 of each (variant, config) "
                             "for this long, in turns (A B A B), and report each turn's median (clocks under load)")
    parser.add_argument("--json")
    parser.add_argument("--profile-once", action="store_true",
                        help="compile, then run each (variant, config) once at T=1 and 256 between "
                             "cudaProfilerStart/Stop (for ncu --profile-from-start off)")
    args = parser.parse_args()
    device = torch.device("cuda")
    spec = SHAPES["gpt-oss-20b"]
    g = torch.Generator().manual_seed(0)
    ex = make_experts(spec, "mxfp4", device, g)
    s1, s2 = ex.kwargs["w1_scales"], ex.kwargs["w2_scales"]
    configs = [c for c in CONFIGS if c[0] in args.configs.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="moe_variants_"))
    modules = {name: load_variant(name, edits, tmp) for name, edits in VARIANTS.items()
               if name in args.variants.split(",")}
    tokens_list = [1, 256] if args.profile_once else [int(t) for t in args.tokens.split(",")]
    if args.prefill:
        tokens_list = list(PREFILL)
    rows = []
    for tokens in tokens_list:
        inputs = [(torch.randn(tokens, spec.hidden, generator=g).to(torch.bfloat16).to(device),
                   *route_ref(torch.randn(tokens, spec.experts, generator=g).to(device), spec.top_k))
                  for _ in range(SETS)]
        inter = [torch.randn(tokens * spec.top_k, spec.inter, generator=g).to(torch.bfloat16).to(device)
                 for _ in range(SETS)]
        block_m = PREFILL[tokens][0] if args.prefill else 16
        aligns = [moe_align(ids, spec.experts, block_m) for _, _, ids in inputs]
        hit = statistics.mean(ids.unique().numel() for _, _, ids in inputs)
        bytes1 = hit * 2 * spec.inter * spec.hidden * (1 / 2 + 1 / 32)  # blocks + scales of the experts hit
        bytes2 = bytes1 / 2
        if args.prefill:
            _, n, k, w, s, _ = PREFILL[tokens]  # (group_m 1 in every entry)
            configs = [("tuned", n, k, w, s, False)]
        first1 = first2 = None  # the first config's outputs: other configs' bits against them (batch invariance)
        for cname, n, k, w, s, swap in configs:
            config = MoEKernelConfig(block_m=block_m, block_n=n, block_k=k, num_warps=w, num_stages=s, swap_ab=swap)
            ref1 = ref2 = None
            for vname, mod in modules.items():
                def gemm1(i, mod=mod, config=config, inputs=inputs, aligns=aligns):
                    return mod.moe_gemm1_swiglu(inputs[i][0], aligns[i], spec.top_k, ex.w1, ex.b1, s1, GROUP, 7.0,
                                                1.702, config=config)

                def gemm2(i, mod=mod, config=config, inputs=inputs, aligns=aligns, inter=inter):
                    return mod.moe_gemm2(inter[i], aligns[i], inputs[i][1], ex.w2, ex.b2, s2, config=config)

                out1, out2 = gemm1(0).float(), gemm2(0).float()
                if ref1 is None:
                    ref1, ref2 = out1, out2
                if first1 is None:
                    first1, first2 = out1, out2
                same_bits = torch.equal(out1, first1) and torch.equal(out2, first2)
                diff = max((out1 - ref1).abs().max().item() / ref1.abs().max().item(),
                           (out2 - ref2).abs().max().item() / ref2.abs().max().item())
                if args.sustain:
                    rows.append({"tokens": tokens, "variant": vname, "config": cname,
                                 "fn": lambda i, gemm1=gemm1, gemm2=gemm2: (gemm1(i), gemm2(i))})
                    continue
                if args.profile_once:
                    torch.cuda.synchronize()
                    torch.cuda.cudart().cudaProfilerStart()
                    gemm1(1)
                    gemm2(1)
                    torch.cuda.synchronize()
                    torch.cuda.cudart().cudaProfilerStop()
                    print(f"profiled T={tokens} {vname} {cname}", flush=True)
                    continue
                t1, t2 = graph_seconds(gemm1, SETS), graph_seconds(gemm2, SETS)
                rows.append({"tokens": tokens, "variant": vname, "config": cname, "gemm1_us": t1 * 1e6,
                             "gemm2_us": t2 * 1e6, "gemm1_gbs": bytes1 / t1 / 1e9, "gemm2_gbs": bytes2 / t2 / 1e9,
                             "rel_diff": diff, "same_bits_as_first_config": same_bits})
                print(f"T={tokens:4d} {vname:10s} {cname:16s} gemm1 {t1 * 1e6:7.1f} us ({bytes1 / t1 / 1e9:5.0f} GB/s)"
                      f"  gemm2 {t2 * 1e6:7.1f} us ({bytes2 / t2 / 1e9:5.0f} GB/s)  diff {diff:.1e}"
                      f"  {'same bits' if same_bits else 'OTHER BITS'} as {configs[0][0]}", flush=True)
    if args.profile_once:
        return
    if args.sustain:
        sustained(rows, args.sustain)
        return
    print("\n| T | variant | best gemm1 (config) | best gemm2 (config) | n64 gemm1 + gemm2 |")
    print("|---|---|---|---|---|")
    for tokens in tokens_list:
        for vname in modules:
            mine = [r for r in rows if r["tokens"] == tokens and r["variant"] == vname]
            b1 = min(mine, key=lambda r: r["gemm1_us"])
            b2 = min(mine, key=lambda r: r["gemm2_us"])
            base = next((r for r in mine if r["config"] in ("n64", "tuned")), None)
            base_text = f"{base['gemm1_us'] + base['gemm2_us']:.1f}" if base else "-"
            print(f"| {tokens} | {vname} | {b1['gemm1_us']:.1f} ({b1['config']}) | {b2['gemm2_us']:.1f} "
                  f"({b2['config']}) | {base_text} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

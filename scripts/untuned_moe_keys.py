"""Which batch sizes run untuned MoE tiles, per tuned device, shape, format and GEMM.

PYTHONPATH=src python3 scripts/untuned_moe_keys.py [--devices NVIDIA_H100_80GB_HBM3,...] [--shapes ...] [--max-tokens N]
PYTHONPATH=src python3 scripts/untuned_moe_keys.py --devices NVIDIA_H200 --tokens-for mixtral-8x7b:bf16
PYTHONPATH=src python3 scripts/untuned_moe_keys.py --outgrown [--devices ...] [--tokens-for SHAPE:FORMAT]

`moe_kernel_config` reads the entry of the nearest key of a shape's table (this device's file, else a same-
architecture device's, else the nearest expert count's). An entry equal to the fallback's config for its own key
(`moe_configs._fallback`; any warp count, and for GEMM 2 either one-dot flag, which it ignores) was written untuned
(the tables were first filled that way), and a shape without any table runs the fallback at every T. A tuned winner
can also equal the fallback's tile (the fallback's tiles are the H100's tuned gpt-oss choices, so its MXFP4 files hold
several): the list says where to look, not what was never tuned. For each (device, shape, format, GEMM) this prints
the runs of T up to --max-tokens that read such an entry, with the key, so that `scripts/tune_moe.py --tokens ...` can
take them (`scripts/device/moe_keys.sh` tunes them and checks them in the model in one device call).
`--outgrown` lists instead, for the same tables, the keys at whose T an expert's mean rows fit the entry's tile and at
the end of whose run they do not (`outgrown_runs`): keys tuned at their own T alone may lose over the rest of the run
(`tune_moe.py --span`, its default since 2026-12-04, tunes each key over its run); with --tokens-for it prints those
keys and the powers of two inside their runs.
Reads the files only: no GPU, no torch kernels.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from quickmoe.bench.moe_experts import SHAPES
from quickmoe.kernels import moe_configs

# the shapes quickmoe serves (tiny ones are the tests')
SERVED = ("gpt-oss-20b", "gpt-oss-120b", "gpt-oss-20b-tp2", "gpt-oss-120b-tp2", "qwen3-30b-a3b", "mixtral-8x7b")
KERNEL_WEIGHTS = {"mxfp4": "mxfp4", "bf16": "dense", "fp8": "fp8", "nvfp4": "nvfp4"}  # format -> the files' name


def key_runs(experts: int, n: int, k: int, weights: str, device: str, proj: str, max_tokens: int,
             config_dir: Path = moe_configs.CONFIG_DIR):
    """(key, its entry, first T, last T) for each key of the table `moe_kernel_config` reads for this GEMM, whose run
    of T in 1..max_tokens is not empty; None where no table serves the shape."""
    arch = moe_configs.TUNED_DEVICE_ARCH.get(device)
    path = moe_configs._config_file(experts, n, k, weights, device, arch, config_dir, proj)
    table = moe_configs._load(path) if path is not None else None
    if not table:
        return None
    keys = sorted(table)
    starts = moe_configs.nearest_key_starts(keys)
    ends = [min(start - 1, max_tokens) for start in starts[1:]] + [max_tokens]
    return [(key, table[key], start, end) for key, start, end in zip(keys, starts, ends) if start <= end]


def untuned_runs(experts: int, n: int, k: int, weights: str, device: str, proj: str, max_tokens: int,
                 config_dir: Path = moe_configs.CONFIG_DIR) -> list[tuple[int, int, int | None]]:
    """(first T, last T, key) for each run of T in 1..max_tokens whose GEMM reads an untuned entry: key None where
    no table serves the shape (the fallback at every T)."""
    runs = key_runs(experts, n, k, weights, device, proj, max_tokens, config_dir)
    if runs is None:
        return [(1, max_tokens, None)]
    return [(start, end, key) for key, config, start, end in runs if _untuned(config, key, proj)]


def mean_rows(tokens: int, top_k: int, experts: int) -> float:
    """Rows an expert that gets any takes on average at T tokens (random routing): T * k over the experts hit (the
    same estimate as `tune_moe.block_m_candidates`)."""
    return tokens * top_k / min(experts, tokens * top_k)


def outgrown_runs(experts: int, top_k: int, n: int, k: int, weights: str, device: str, proj: str, max_tokens: int,
                  config_dir: Path = moe_configs.CONFIG_DIR) -> list[tuple[int, int, int, int]]:
    """(first T, last T, key, the entry's block_m) for each key at whose T an expert's mean rows (`mean_rows`) fit
    one of the entry's tiles and at the last T of whose run, up to max_tokens, they do not: there each expert's
    weights are read once a tile more than the tuner saw. A key tuned at its own T alone (before `tune_moe.py
    --span`) can hold a tile that loses over the rest of its run, and these are the widest such gaps (on the H200
    in 2026-12: Qwen3-30B-A3B NVFP4's key 128, 16-row tiles for T = 97-576, 8 -> 36 rows an expert). The mean does
    not catch every trap: Mixtral-8x7B NVFP4's H200 key 65 held a 16-row tile for T = 65-72, already past the mean
    at the key (16.2 rows; 18 at T = 72), and the 72-sequence decode step was 0.5% slower with it; re-tuned over
    the run the key was 8.8% faster (2026-12-04 fourth session)."""
    runs = key_runs(experts, n, k, weights, device, proj, max_tokens, config_dir) or []
    return [(start, end, key, config.block_m) for key, config, start, end in runs
            if mean_rows(key, top_k, experts) <= config.block_m < mean_rows(end, top_k, experts)]


def _untuned(config: moe_configs.MoEKernelConfig, key: int, proj: str) -> bool:
    """The fallback's config for `key`, but for the warp count (the FP8 files were first filled with GEMM 1's
    fallback tiles on 8 warps) and, for GEMM 2, the one dot it ignores."""
    fallback = dataclasses.replace(moe_configs._fallback(key), num_warps=config.num_warps)
    if proj == "down":
        fallback = dataclasses.replace(fallback, gate_up_one_dot=config.gate_up_one_dot)
    return config == fallback


def tokens_to_tune(runs: list[tuple[int, int, int | None]]) -> list[int]:
    """The T to give `tune_moe.py --tokens` for these runs (both GEMMs' together): each run's key (tuning there
    replaces its entry; past the run only where --max-tokens cut it), and the powers of two inside the run (new keys;
    a shape without a table gets the powers of two from 1)."""
    tokens = set()
    for first, last, key in runs:
        if key is not None:
            tokens.add(key)
        tokens.update(1 << i for i in range(last.bit_length()) if first <= 1 << i <= last)
    return sorted(tokens)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default=",".join(sorted(moe_configs.TUNED_DEVICE_ARCH)),
                        help="devices as the files spell them (default: every tuned device)")
    parser.add_argument("--shapes", default=",".join(SERVED), help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--max-tokens", type=int, default=8192, help="the largest batch size (default 8192)")
    parser.add_argument("--outgrown", action="store_true",
                        help="list instead the keys whose run of T outgrows the entry's tile (`outgrown_runs`): "
                             "where to re-tune over the run")
    parser.add_argument("--tokens-for", metavar="SHAPE:FORMAT",
                        help="print only the comma-separated T to tune for this shape and format on the one device of "
                             "--devices (`tokens_to_tune`), e.g. for scripts/device/moe_keys.sh's TOKENS")
    args = parser.parse_args()
    if args.max_tokens < 1:
        parser.error(f"--max-tokens {args.max_tokens}: expected a positive batch size")
    for name in args.shapes.split(","):
        if name not in SHAPES:
            parser.error(f"--shapes: {name!r} is not a shape; expected some of {', '.join(SHAPES)}")
    for device in args.devices.split(","):
        if device not in moe_configs.TUNED_DEVICE_ARCH:
            parser.error(f"--devices: {device!r} has no tuned files; expected some of "
                         f"{', '.join(sorted(moe_configs.TUNED_DEVICE_ARCH))}")
    if args.tokens_for is not None:
        name, _, fmt = args.tokens_for.partition(":")
        if name not in SHAPES:
            parser.error(f"--tokens-for {args.tokens_for!r}: shape {name!r}; expected SHAPE:FORMAT with a shape of "
                         f"{', '.join(SHAPES)}")
        if fmt not in SHAPES[name].formats:
            parser.error(f"--tokens-for {args.tokens_for!r}: format {fmt!r}; {name} takes one of "
                         f"{', '.join(SHAPES[name].formats)}")
        if "," in args.devices:
            parser.error(f"--tokens-for needs one device in --devices, got {args.devices!r}")
        shape = SHAPES[name]
        runs = [run[:3] for proj, n, k in (("gate_up", 2 * shape.inter, shape.hidden),
                                           ("down", shape.hidden, shape.inter))
                for run in _runs(args, shape, n, k, KERNEL_WEIGHTS[fmt], args.devices, proj)]
        print(",".join(map(str, tokens_to_tune(runs))))
        return 0
    for device in args.devices.split(","):
        for name in args.shapes.split(","):
            shape = SHAPES[name]
            for fmt in shape.formats:
                weights = KERNEL_WEIGHTS[fmt]
                for proj, n, k in (("gate_up", 2 * shape.inter, shape.hidden), ("down", shape.hidden, shape.inter)):
                    runs = _runs(args, shape, n, k, weights, device, proj)
                    if args.outgrown:
                        text = "; ".join(f"T = {a}-{b} (key {key}, {m}-row tiles: {_rows(shape, key)} -> "
                                         f"{_rows(shape, b)} rows an expert)" for a, b, key, m in runs)
                        print(f"{device} {name} {fmt} {proj}: {text or 'no key outgrows its tile'}")
                        continue
                    text = "; ".join(f"T = {a}-{b} (" + ("no table" if key is None else f"key {key}") + ")"
                                     for a, b, key in runs)
                    print(f"{device} {name} {fmt} {proj}: {text or 'tuned at every T'}")
    return 0


def _runs(args: argparse.Namespace, shape, n: int, k: int, weights: str, device: str, proj: str) -> list[tuple]:
    """`outgrown_runs` with --outgrown, else `untuned_runs`."""
    if args.outgrown:
        return outgrown_runs(shape.experts, shape.top_k, n, k, weights, device, proj, args.max_tokens)
    return untuned_runs(shape.experts, n, k, weights, device, proj, args.max_tokens)


def _rows(shape, tokens: int) -> str:
    return f"{mean_rows(tokens, shape.top_k, shape.experts):.1f}"


if __name__ == "__main__":
    sys.exit(main())

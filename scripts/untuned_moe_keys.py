"""Which batch sizes run untuned MoE tiles, per tuned device, shape, format and GEMM.

PYTHONPATH=src python3 scripts/untuned_moe_keys.py [--devices NVIDIA_H100_80GB_HBM3,...] [--shapes ...] [--max-tokens N]
PYTHONPATH=src python3 scripts/untuned_moe_keys.py --devices NVIDIA_H200 --tokens-for mixtral-8x7b:bf16

`moe_kernel_config` reads the entry of the nearest key of a shape's table (this device's file, else a same-
architecture device's, else the nearest expert count's). An entry equal to the fallback's config for its own key
(`moe_configs._fallback`; any warp count, and for GEMM 2 either one-dot flag, which it ignores) was written untuned
(the tables were first filled that way), and a shape without any table runs the fallback at every T. A tuned winner
can also equal the fallback's tile (the fallback's tiles are the H100's tuned gpt-oss choices, so its MXFP4 files hold
several): the list says where to look, not what was never tuned. For each (device, shape, format, GEMM) this prints
the runs of T up to --max-tokens that read such an entry, with the key, so that `scripts/tune_moe.py --tokens ...` can
take them (`scripts/device/moe_keys.sh` tunes them and checks them in the model in one device call).
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


def untuned_runs(experts: int, n: int, k: int, weights: str, device: str, proj: str, max_tokens: int,
                 config_dir: Path = moe_configs.CONFIG_DIR) -> list[tuple[int, int, int | None]]:
    """(first T, last T, key) for each run of T in 1..max_tokens whose GEMM reads an untuned entry: key None where
    no table serves the shape (the fallback at every T)."""
    arch = moe_configs.TUNED_DEVICE_ARCH.get(device)
    path = moe_configs._config_file(experts, n, k, weights, device, arch, config_dir, proj)
    table = moe_configs._load(path) if path is not None else None
    if not table:
        return [(1, max_tokens, None)]
    keys = sorted(table)
    starts = moe_configs.nearest_key_starts(keys)
    runs = []
    for i, (key, start) in enumerate(zip(keys, starts)):
        end = min(starts[i + 1] - 1 if i + 1 < len(keys) else max_tokens, max_tokens)
        if start <= end and _untuned(table[key], key, proj):
            runs.append((start, end, key))
    return runs


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
        runs = [run for proj, n, k in (("gate_up", 2 * shape.inter, shape.hidden), ("down", shape.hidden, shape.inter))
                for run in untuned_runs(shape.experts, n, k, KERNEL_WEIGHTS[fmt], args.devices, proj, args.max_tokens)]
        print(",".join(map(str, tokens_to_tune(runs))))
        return 0
    for device in args.devices.split(","):
        for name in args.shapes.split(","):
            shape = SHAPES[name]
            for fmt in shape.formats:
                weights = KERNEL_WEIGHTS[fmt]
                for proj, n, k in (("gate_up", 2 * shape.inter, shape.hidden), ("down", shape.hidden, shape.inter)):
                    runs = untuned_runs(shape.experts, n, k, weights, device, proj, args.max_tokens)
                    text = "; ".join(f"T = {a}-{b} (" + ("no table" if key is None else f"key {key}") + ")"
                                     for a, b, key in runs)
                    print(f"{device} {name} {fmt} {proj}: {text or 'tuned at every T'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

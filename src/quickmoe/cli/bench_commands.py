"""The `quickmoe bench` subcommands that run the model or its kernels: coldstart, generate, moe, attention,
quality (each imports its benchmark when it runs)."""

from __future__ import annotations

import argparse
import sys

from quickmoe.cli.args import _default_dir, _engine_options, _int_list, _parallel_flags
from quickmoe.errors import ConfigError


def cmd_bench_quality(args: argparse.Namespace) -> int:
    from quickmoe.bench.quality import QualityBenchOptions, run_quality_bench

    run_quality_bench(QualityBenchOptions(
        model=str(args.model) if args.model else str(_default_dir()), heldout=args.heldout,
        num_prompts=args.num_prompts, prompt_len=args.prompt_len, max_tokens=args.max_tokens, window=args.window,
        eval_tokens=args.eval_tokens, dtype=args.dtype, device=args.device, kv_cache_memory=args.kv_cache_memory,
        only=tuple(o.strip() for o in args.only.split(",") if o.strip()), json_out=args.json_out))
    return 0


def cmd_bench_coldstart(args: argparse.Namespace) -> int:
    import shlex

    from quickmoe.bench.coldstart import ColdstartOptions, run_coldstart

    run_coldstart(ColdstartOptions(model=args.model, runs=args.runs, device=args.device,
                                   drop_caches=args.drop_caches, compare_uncached=args.compare_uncached,
                                   baseline=args.baseline, json_out=args.json_out, compile=args.compile,
                                   cuda_graphs=args.cuda_graphs, compile_compare=args.compile_compare,
                                   compare_cold_kernels=args.compare_cold_kernels, import_floor=args.import_floor,
                                   generate_args=_parallel_flags(args) + tuple(shlex.split(args.generate_args))))
    return 0


def cmd_bench_moe(args: argparse.Namespace) -> int:
    from quickmoe.bench.moe import MoEBenchOptions, run_moe_bench

    run_moe_bench(MoEBenchOptions(shapes=tuple(s.strip() for s in args.shapes.split(",") if s.strip()),
                                  tokens=_int_list(args.tokens, "--tokens"), device=args.device, warmup=args.warmup,
                                  iters=args.iters, json_out=args.json_out, baselines=not args.no_baselines,
                                  formats=(tuple(f.strip() for f in args.formats.split(",") if f.strip())
                                           if args.formats else None)))
    return 0


def cmd_bench_attention(args: argparse.Namespace) -> int:
    from quickmoe.bench.attention import AttentionBenchOptions, run_attention_bench

    def pairs(text: str) -> tuple[tuple[int, int], ...]:
        try:
            return tuple(tuple(int(x) for x in item.split(":")) for item in text.split(",") if item)
        except ValueError:
            raise ConfigError(f"--prefill {text!r}: expected BATCH:LENGTH pairs, e.g. 1:1024,4:2048") from None

    run_attention_bench(AttentionBenchOptions(
        batches=_int_list(args.batches, "--batches"), contexts=_int_list(args.contexts, "--contexts"),
        windows=_int_list(args.windows, "--windows"), prefill=pairs(args.prefill), reps=args.reps,
        kv_layout=args.kv_layout, block_size=args.block_size, json_out=args.json_out))
    return 0


def cmd_bench_generate(args: argparse.Namespace) -> int:
    from quickmoe.bench.generate import GenerateBenchOptions, run_generate_bench

    engine = _engine_options(args)
    if "--max-num-seqs" not in sys.argv:  # unless told: as many running requests as prompts (up to 256)
        engine.pop("max_num_seqs")
    run_generate_bench(GenerateBenchOptions(
        model=args.model, num_prompts=args.num_prompts, input_len=args.input_len, output_len=args.output_len,
        decode_steps=args.decode_steps, baseline=args.baseline, baseline_prompts=args.baseline_prompts,
        baseline_batch_size=args.baseline_batch_size, seed=args.seed, json_out=args.json_out, engine=engine))
    return 0

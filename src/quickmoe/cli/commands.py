"""`quickmoe generate`, `serve`, `bench serve`, `make-checkpoint` and `info`: each imports what it runs when it
runs (so `quickmoe --help` answers at once)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import time
from pathlib import Path

from quickmoe.cli.args import (
    _default_dir,
    _engine_options,
    _int_list,
    _is_synthetic,
    _spawn_ranks_early,
    _torchrun_follower,
    checked_inputs,
)
from quickmoe.errors import ConfigError

logger = logging.getLogger("quickmoe")


def _imports_gc() -> contextlib.AbstractContextManager:
    """The imports of a start, with the garbage collector paused and what they made frozen (unless
    `QUICKMOE_STARTUP_GC=normal`)."""
    from quickmoe.startup.gc_pause import paused_then_frozen_gc, startup_gc_paused  # stdlib only

    return paused_then_frozen_gc() if startup_gc_paused() else contextlib.nullcontext()


def cmd_serve(args: argparse.Namespace) -> int:
    from quickmoe.startup.report import StartupReport

    report = StartupReport.from_process_start()
    from quickmoe.startup.early_start import (
        EarlyStart,  # stdlib only: torch is not imported yet
    )

    config = checked_inputs(args)["server"]  # torch-free: bad flags fail before anything loads
    from quickmoe.startup.gc_pause import serving_gc_frozen  # stdlib only

    freeze_heap = serving_gc_frozen()  # a bad QUICKMOE_SERVING_GC fails before the load too
    from quickmoe.server.serve import bind_socket

    # a taken port fails now, not after the model loaded; under torchrun only rank 0 serves HTTP
    sock = None if _torchrun_follower() else bind_socket(config.host, config.port)
    frontend = None
    if sock is not None and config.frontend_process:  # the HTTP server's process starts now, beside the load
        from quickmoe.server.engine_process import start_frontend

        frontend = start_frontend(sock, args.model, logging.getLogger().getEffectiveLevel())
    try:
        device = "cpu" if args.model is None and args.device == "auto" else args.device
        with _imports_gc():
            early = EarlyStart.begin(args.model, device)
            spawned = _spawn_ranks_early(args, device)
            from quickmoe.llm import LLM

        report.mark("imports")
        options = _engine_options(args)
        options["device"] = device
        llm = LLM(args.model, startup_report=report, progress=not args.quiet, early_start=early, seed=args.seed,
                  spawned_ranks=spawned, **options)
        if _is_synthetic(llm.model_dir):
            logger.warning("%s has random weights (made by quickmoe make-checkpoint): the text is meaningless",
                           llm.model_dir)
        llm.engine.heap_freeze.armed = freeze_heap  # the idle work's last piece: the heap frozen
        _warm_up_before_ready(llm, args.warmup)
        if args.generation_config != "vllm":
            from quickmoe.server.config import load_sampling_defaults

            source = llm.model_dir if args.generation_config == "auto" else Path(args.generation_config)
            config = dataclasses.replace(config, sampling_defaults=load_sampling_defaults(source))
        report.log()
    except BaseException:
        if frontend is not None:
            frontend.abandon()
        raise
    if frontend is None:
        from quickmoe.server.app import create_app
        from quickmoe.server.serve import run_server

        llm.tokenizer.encode("")  # this process tokenizes the prompts: what encoding loads on first use loads now
        run_server(create_app(llm, config), config, sock)
        return 0
    from quickmoe.server.engine_process import EngineInfo, run_engine_host

    sock.close()  # the frontend holds its own copy
    info = EngineInfo(model_dir=str(llm.model_dir), vocab_size=llm.config.vocab_size,
                      max_model_len=llm.max_model_len, max_num_seqs=llm.engine.scheduler.max_num_seqs,
                      server_config=config, startup_report=report)
    return run_engine_host(llm.engine, frontend, info)


def warms_up_before_ready(mode: str, kernels_compiled_at_startup: int) -> bool:
    """serve --warmup: whether the engine's idle work (deferred graphs, the MoE kernels of prefill sizes)
    runs before the server reports ready. auto: when start-up compiled kernels, i.e. the kernel cache was empty or
    stale, so that idle work would compile too and, left for later, stall the first requests that need it."""
    return mode == "eager" or (mode == "auto" and kernels_compiled_at_startup > 0)


def _warm_up_before_ready(llm, mode: str) -> None:
    compiled = llm.runner.kernel_cache.info.get("new_entries_startup", 0)
    if not warms_up_before_ready(mode, compiled):
        return
    t0 = time.perf_counter()
    pieces = llm.engine.finish_idle_work()
    logger.info("warm-up before serving (--warmup %s; %d kernel cache entries written at start-up): %d pieces "
                "(graphs of decode and prompt steps, MoE kernels of prefill sizes) in %.2f s", mode, compiled, pieces,
                time.perf_counter() - t0)


def cmd_bench_serve(args: argparse.Namespace) -> int:
    import os

    from quickmoe.bench.serve import ServeBenchOptions, run_serve_bench

    def span(text: str | None, flag: str) -> tuple[int, int] | None:
        if text is None:
            return None
        values = _int_list(text, flag)
        if len(values) != 2:
            raise ConfigError(f"{flag} = {text!r}: expected LO,HI")
        return values[0], values[1]

    lo_hi = span(args.token_range, "--token-range")
    api_key = args.api_key or os.environ.get("QUICKMOE_API_KEY") or os.environ.get("OPENAI_API_KEY")
    run_serve_bench(ServeBenchOptions(
        base_url=args.base_url, concurrency=_int_list(args.concurrency, "--concurrency"), model=args.model,
        num_prompts=args.num_prompts, input_len=args.input_len, output_len=args.output_len,
        result_json=args.result_json, api_key=api_key, seed=args.seed, token_range=lo_hi,
        timeout_s=args.timeout, warmup=not args.no_warmup,
        input_len_range=span(args.input_len_range, "--input-len-range"),
        output_len_range=span(args.output_len_range, "--output-len-range"),
        disconnect_fraction=args.disconnect_fraction, duration_s=args.duration,
        shared_prefix_len=args.shared_prefix_len, op_family_steps=args.op_family_steps))
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from quickmoe.startup.report import StartupReport

    report = StartupReport.from_process_start()
    from quickmoe.startup.early_start import (
        EarlyStart,  # stdlib only: torch is not imported yet
    )

    params = checked_inputs(args)["sampling"]  # torch-free: bad flags fail before anything starts
    with _imports_gc():
        # Before the heavy imports: read the shards into the page cache (skipped when already cached), create
        # the CUDA context and page-lock the loader's host ring, on threads, while torch imports.
        early = EarlyStart.begin(args.model, args.device)
        spawned = _spawn_ranks_early(args, args.device)
        from quickmoe.llm import LLM

    report.mark("imports")
    t0 = time.perf_counter()
    llm = LLM(args.model, startup_report=report, progress=not args.quiet, early_start=early, spawned_ranks=spawned,
              **_engine_options(args))
    t_load = time.perf_counter() - t0
    if _is_synthetic(llm.model_dir):
        logger.warning("%s has random weights (made by quickmoe make-checkpoint): the text is meaningless",
                       llm.model_dir)
    t1 = time.perf_counter()
    if args.chat:
        outputs = [llm.chat([{"role": "user", "content": p}], params) for p in args.prompt]
    else:
        outputs = llm.generate(args.prompt, params)
    elapsed = time.perf_counter() - t1
    for prompt, out in zip(args.prompt, outputs):
        if args.json:
            print(json.dumps({"prompt": prompt, "text": out.text, "token_ids": out.token_ids,
                              "finish_reason": out.finish_reason}, ensure_ascii=False))
        else:
            print(f"--- prompt: {prompt!r}\n{out.text}\n--- ({len(out.token_ids)} tokens, {out.finish_reason})")
    n_tokens = sum(len(o.token_ids) for o in outputs)
    logger.info("ready in %.2f s; generated %d tokens in %.2f s (%.1f tokens/s)", t_load, n_tokens, elapsed,
                n_tokens / max(elapsed, 1e-9))
    if args.startup_json:
        Path(args.startup_json).write_text(report.to_json() + "\n")
    return 0


def cmd_make_checkpoint(args: argparse.Namespace) -> int:
    from quickmoe.checkpoint.synth import write_checkpoint

    out = write_checkpoint(Path(args.out), preset=args.preset, layers=args.layers, experts=args.experts,
                           seed=args.seed, experts_dtype=args.weights, overwrite=args.overwrite,
                           progress=not args.quiet)
    print(out)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from quickmoe.models.registry import check_checkpoint

    model_dir = Path(args.model) if args.model else _default_dir()
    config, reader = check_checkpoint(model_dir)  # what generate validates before it loads a weight
    experts = config.quantization.scheme if config.quantization is not None else "bf16"
    kinds = {k: config.layer_types.count(k) for k in sorted(set(config.layer_types))}
    moe_layers = sum(config.is_moe_layer(i) for i in range(config.num_hidden_layers))
    print(f"{model_dir}\n  architecture: {config.architecture}\n  layers: {config.num_hidden_layers} {kinds}, "
          f"{moe_layers} with experts\n  hidden {config.hidden_size}, intermediate {config.intermediate_size} "
          f"(experts {config.moe_intermediate_size}), heads "
          f"{config.num_attention_heads}/{config.num_key_value_heads} x {config.head_dim}\n"
          f"  experts: {config.num_local_experts} (top-{config.num_experts_per_tok}), {experts}\n"
          f"  vocab: {config.vocab_size}\n  checkpoint: {len(reader.entries)} tensors, {reader.total_bytes:,} bytes "
          f"in {len(reader.files)} file(s)" + ("\n  random weights (quickmoe make-checkpoint)"
                                               if _is_synthetic(model_dir) else ""))
    return 0

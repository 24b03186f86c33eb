"""The `quickmoe` command.

Subcommands import their heavy dependencies lazily so `quickmoe --help` answers at once. Bad input
raises a `QuickMoEError`, printed as one line without a traceback (exit status 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from pathlib import Path

from quickmoe import __version__
from quickmoe.checkpoint.presets import PRESETS
from quickmoe.errors import ConfigError, QuickMoEError

logger = logging.getLogger("quickmoe")

EPILOG_GENERATE = """examples:
  quickmoe generate --prompt "Hello"                 # embedded tiny random model on CPU (text is meaningless)
  quickmoe generate ./gpt-oss-20b --chat --prompt "What is MoE?" --max-tokens 64
"""


def _add_common(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    g.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors; no progress bars")


def parse_bytes(text: str) -> int:
    """'4GiB', '512MiB', '2GB', '1000000' -> bytes (ConfigError naming the value otherwise)."""
    units = {"": 1, "B": 1, "K": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9, "T": 1e12, "TB": 1e12,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
    stripped = text.strip().upper()
    number = stripped.rstrip("KMGTIB")
    unit = stripped[len(number):]
    try:
        value = float(number) * units[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a size such as 4GiB, 512MiB, 2GB or a byte count")
    if not 1 <= value < float("inf"):  # NaN, infinities and sizes below a byte
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive, finite size")
    return int(value)


def _add_engine_args(p: argparse.ArgumentParser) -> None:
    """Options of `EngineConfig` shared by the commands that run a model."""
    g = p.add_argument_group("engine")
    g.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N")
    g.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"),
                   help="activation/weight dtype of non-expert layers (auto: bfloat16 on CUDA, float32 on CPU)")
    g.add_argument("--max-model-len", type=int, default=None,
                   help="maximum prompt + output tokens per request (default: the model's, capped to the KV cache)")
    g.add_argument("--max-num-seqs", type=int, default=256, help="requests running at once (default 256)")
    g.add_argument("--max-num-batched-tokens", type=int, default=8192,
                   help="tokens computed per step; longer prompts are prefilled in chunks (default 8192)")
    g.add_argument("--long-prefill-token-threshold", type=int, default=None, metavar="N",
                   help="the most prompt tokens one request prefills per step, so that running decodes and new "
                   "requests are never held up by more than one such chunk (default: 128 on CPU, a quarter of "
                   "--max-num-batched-tokens on CUDA)")
    g.add_argument("--block-size", type=int, default=16, choices=(16, 32, 64, 128),
                   help="KV cache positions per block (default 16)")
    g.add_argument("--kv-cache-memory", "--kv-cache-memory-bytes", type=parse_bytes, default=None, metavar="SIZE",
                   help="KV cache size, e.g. 20GiB (default: on CUDA what --gpu-memory-utilization leaves after the "
                   "weights and one step's activations; on CPU 1GiB)")
    g.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                   help="fraction of the GPU's memory quickmoe may use in all (default 0.9)")
    g.add_argument("--moe-kernels", default="auto", choices=("auto", "torch", "triton"),
                   help="MoE experts: the Triton kernels (CUDA; MXFP4 and bf16 experts), the torch reference, or "
                   "auto (default: Triton on CUDA when installed, else torch)")
    g.add_argument("--attention-kernels", default="auto", choices=("auto", "torch", "triton"),
                   help="paged attention: the Triton kernels, the torch reference, or auto (default: Triton on CUDA)")
    g.add_argument("--compile", default="off", choices=("off", "on"),
                   help="compile the decoder layers with torch.compile at start-up (one graph per layer kind, "
                   "cached under the quickmoe cache; default off until validated on the GPU)")
    g.add_argument("--cuda-graphs", default="auto", choices=("auto", "on", "off"),
                   help="run decode steps in CUDA graphs, one per batch-size bucket (1, 2, 4, ... up to "
                   "--max-num-seqs; auto, the default: on CUDA; on: CUDA only)")
    g.add_argument("--cuda-graphs-startup-max", type=int, default=8, metavar="N",
                   help="capture the buckets up to N at start-up, the larger ones when a step first needs them or "
                   "while the server is idle (default 8; --max-num-seqs or more: all at start-up)")
    g.add_argument("--enforce-eager", action="store_true",
                   help="no torch.compile and no CUDA graphs (overrides --compile and --cuda-graphs)")
    _add_parallel_args(g)
    g.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True,
                   help="reuse the KV blocks of prompt prefixes shared across requests (default on; "
                   "--no-enable-prefix-caching computes every prompt in full)")


def _add_parallel_args(g) -> None:  # an argparse group or parser
    g.add_argument("--tensor-parallel-size", "-tp", type=int, default=1, metavar="N",
                   help="spread the model over N GPUs, one process each (started by quickmoe, or run the command "
                   "under torchrun with N processes in all, across nodes with --nnodes; default 1)")
    g.add_argument("--enable-expert-parallel", action="store_true",
                   help="with -tp N: give each rank whole MoE experts instead of a share of every expert")


def checked_inputs(args: argparse.Namespace) -> dict[str, object]:
    """Every option of a parsed command line as the validated config it becomes (torch-free, before anything
    starts): "engine" (EngineConfig), "sampling" (SamplingParams, generate), "server" (ServerConfig, serve).
    A bad value raises the typed error naming the option; the CLI prints it as one line."""
    import os

    from quickmoe.config import EngineConfig

    checked: dict[str, object] = {"engine": EngineConfig(model=args.model, **_engine_options(args))}
    if args.command == "generate":
        from quickmoe.engine.sampling_params import SamplingParams

        checked["sampling"] = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature,
                                             top_p=args.top_p, top_k=args.top_k, seed=args.seed, stop=tuple(args.stop),
                                             ignore_eos=args.ignore_eos)
    elif args.command == "serve":
        from quickmoe.server.config import ServerConfig

        _refuse_vllm_flags(args)
        checked["engine"] = EngineConfig(model=args.model, **_engine_options(args), seed=args.seed)
        # an empty or blank key (e.g. --api-key "$UNSET") is refused by ServerConfig, never taken as "no key"
        api_key = args.api_key if args.api_key is not None else os.environ.get("QUICKMOE_API_KEY")
        checked["server"] = ServerConfig(
            host=args.host, port=args.port, api_key=api_key, max_waiting=args.max_waiting,
            served_model_name=args.served_model_name or ("quickmoe-tiny" if args.model is None else args.model),
            drain_timeout_s=args.drain_timeout, access_log=args.access_log, log_requests=args.enable_log_requests,
            stats_interval_s=None if args.disable_log_stats else 10.0)
    return checked


def _refuse_vllm_flags(args: argparse.Namespace) -> None:
    """vLLM flags quickmoe cannot honour: one ConfigError line each."""
    for flag, value in (("--pipeline-parallel-size", args.pipeline_parallel_size),
                        ("--data-parallel-size", args.data_parallel_size)):
        if value != 1:
            raise ConfigError(f"{flag} {value}: quickmoe spreads a model over GPUs with --tensor-parallel-size "
                              "(and --enable-expert-parallel) only; expected 1")
    if args.chat_template is not None:
        raise ConfigError("--chat-template: not supported; gpt-oss chats are rendered in harmony by openai-harmony, "
                          "other models with the chat template in their checkpoint directory")
    if args.trust_remote_code:
        raise ConfigError("--trust-remote-code: not supported; quickmoe runs no code from a checkpoint")
    for flag, value, allowed in (("--tool-call-parser", args.tool_call_parser, ("openai",)),
                                 ("--reasoning-parser", args.reasoning_parser, ("openai_gptoss", "gpt_oss"))):
        if value is not None and value not in allowed:
            raise ConfigError(f"{flag} {value!r}: quickmoe parses gpt-oss's harmony format only (expected one of "
                              f"{list(allowed)}, or leave it out)")
    if args.generation_config not in ("auto", "vllm") and not Path(args.generation_config).is_dir():
        raise ConfigError(f"--generation-config {args.generation_config!r}: expected auto, vllm or a directory "
                          "holding generation_config.json")


def _engine_options(args: argparse.Namespace) -> dict:
    return dict(device=args.device, dtype=args.dtype, max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
                max_num_batched_tokens=args.max_num_batched_tokens,
                long_prefill_token_threshold=args.long_prefill_token_threshold, block_size=args.block_size,
                kv_cache_memory=args.kv_cache_memory, gpu_memory_utilization=args.gpu_memory_utilization,
                moe_kernels=args.moe_kernels, attention_kernels=args.attention_kernels,
                compile="off" if args.enforce_eager else args.compile,
                cuda_graphs="off" if args.enforce_eager else args.cuda_graphs,
                cuda_graphs_startup_max=args.cuda_graphs_startup_max,
                enable_prefix_caching=args.enable_prefix_caching, tensor_parallel_size=args.tensor_parallel_size,
                enable_expert_parallel=args.enable_expert_parallel)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quickmoe",
        description="quickmoe: a serving engine for Mixture-of-Experts LLMs (gpt-oss first), ready in seconds.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"quickmoe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    gen = sub.add_parser("generate", help="generate text from prompts with a local checkpoint",
                         description="Load a gpt-oss checkpoint directory and complete prompts. With no DIR, "
                         "a tiny random model is built once into the cache and run on CPU.",
                         epilog=EPILOG_GENERATE, formatter_class=argparse.RawDescriptionHelpFormatter)
    gen.add_argument("model", nargs="?", metavar="DIR", help="checkpoint directory (default: embedded tiny model)")
    gen.add_argument("--prompt", "-p", action="append", required=True,
                     help="prompt text; repeat for a batch of prompts")
    gen.add_argument("--chat", action="store_true",
                     help="treat each prompt as a user message and render the chat format (harmony for gpt-oss)")
    gen.add_argument("--max-tokens", type=int, default=32, help="tokens to generate per prompt (default 32)")
    gen.add_argument("--temperature", type=float, default=1.0, help="0 = greedy (default 1.0)")
    gen.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass in (0, 1] (default 1.0)")
    gen.add_argument("--top-k", type=int, default=0, help="sample among the k most likely tokens (default 0: all)")
    gen.add_argument("--seed", type=int, default=None, help="seed for reproducible sampling")
    gen.add_argument("--stop", action="append", default=[], metavar="TEXT",
                     help="stop when the output contains TEXT (not included); repeatable")
    gen.add_argument("--ignore-eos", action="store_true", help="keep generating past end-of-sequence tokens")
    _add_engine_args(gen)
    gen.add_argument("--json", action="store_true", help="print one JSON object per prompt instead of text")
    gen.add_argument("--startup-json", metavar="FILE", help="write the start-up report (phase timings) as JSON")
    _add_common(gen)
    gen.set_defaults(func=cmd_generate)

    mk = sub.add_parser("make-checkpoint", help="write a random checkpoint (gpt-oss, Qwen3-MoE, Mixtral) in the exact "
                        "HF layout",
                        description="Write a checkpoint directory with random weights that transformers and "
                        "quickmoe load: config.json, generation_config.json, safetensors shards with their index, "
                        "and the tokenizer. Streamed: large presets need little RAM. Same seed, same bytes.")
    mk.add_argument("out", metavar="OUT", help="output directory (must not exist or be empty)")
    mk.add_argument("--preset", default="tiny", choices=PRESETS,
                    help="model shape (default tiny: gpt-oss's; qwen3-moe-tiny and mixtral-tiny are the others')")
    mk.add_argument("--layers", type=int, default=None, help="override the number of layers")
    mk.add_argument("--experts", type=int, default=None, help="override the number of experts")
    mk.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    mk.add_argument("--weights", "--experts-dtype", dest="weights", default=None,
                    choices=("mxfp4", "bf16", "fp8", "nvfp4"),
                    help="gpt-oss: experts as MXFP4 blocks+scales (as published; the default) or bf16; Qwen3-MoE and "
                    "Mixtral: bf16 (the default), fp8 (block-scaled 128x128 with weight_scale_inv, as Qwen's FP8 "
                    "releases) or nvfp4 (NVIDIA ModelOpt layout, experts only, with hf_quant_config.json)")
    mk.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    _add_common(mk)
    mk.set_defaults(func=cmd_make_checkpoint)

    bench = sub.add_parser("bench", help="benchmarks (coldstart, moe, generate, serve, quality)", description="Benchmarks; see each subcommand.")
    bench_sub = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    cold = bench_sub.add_parser(
        "coldstart", help="process start -> first token, phase by phase, in fresh subprocesses",
        description="Run `quickmoe generate DIR --max-tokens 1` in N fresh processes and print min and median "
        "of every start-up phase and of weights_ready (process start -> weights resident and processed), the "
        "load rate against a pinned host->device copy measured in the same run, with the page-cache state; "
        "optionally with the PermutationCache off and with transformers' from_pretrained + one forward side by "
        "side. Every start has serve's default engine options (decode CUDA graphs on CUDA) and the persistent Triton "
        "kernel cache (filled by an untimed run first). The runs inherit the environment, so QUICKMOE_LOADER, "
        "QUICKMOE_PREFETCH=0 and QUICKMOE_CUDA_PREINIT=0 compare start-up settings.")
    cold.add_argument("model", metavar="DIR", help="checkpoint directory")
    cold.add_argument("-n", "--runs", type=int, default=3, help="runs per configuration (default 3)")
    cold.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto)")
    cold.add_argument("--drop-caches", action="store_true",
                      help="drop the OS page cache before each run (Linux, root); default: warm page cache")
    cold.add_argument("--compare-uncached", action="store_true",
                      help="also run with the PermutationCache disabled and print the processing ratio")
    cold.add_argument("--baseline", default="none", choices=("none", "transformers"),
                      help="also time transformers' from_pretrained + one forward on the same checkpoint")
    cold.add_argument("--compile", action="store_true",
                      help="also time starts with --compile on: each with fresh compile caches, then with warm ones")
    cold.add_argument("--cuda-graphs", action=argparse.BooleanOptionalAction, default=True,
                      help="every quickmoe start runs with serve's default, decode CUDA graphs on CUDA (the "
                      "capture phase; the default, so --cuda-graphs changes nothing); --no-cuda-graphs: with "
                      "--cuda-graphs off, for comparison")
    cold.add_argument("--generate-args", default="", metavar="ARGS",
                      help="more options for every quickmoe start, e.g. \"--cuda-graphs-startup-max 256\" (to compare "
                      "with serve's defaults)")
    cold.add_argument("--compare-cold-kernels", action="store_true",
                      help="also time starts that each begin with an empty Triton kernel cache (the default runs use "
                      "the persistent one, filled by an untimed run first)")
    cold.add_argument("--compile-compare", metavar="DIR2",
                      help="with --compile: also time fresh-cache compiled starts of DIR2 (e.g. the same model made with "
                      "fewer layers) and print the ratio of the compile phases")
    _add_parallel_args(cold)
    cold.add_argument("--json", dest="json_out", metavar="FILE", help="write all reports and the summary as JSON")
    _add_common(cold)
    cold.set_defaults(func=cmd_bench_coldstart)

    moe = bench_sub.add_parser(
        "moe", help="the MoE experts of gpt-oss, Qwen3-MoE and Mixtral layer shapes: quickmoe vs the reference, "
        "grouped_mm, transformers",
        description="Time quickmoe's Triton MoE (eager and in a CUDA graph) in each weight format a shape supports "
        "(gpt-oss: MXFP4; Qwen3-30B-A3B and Mixtral-8x7B: bf16, FP8, NVFP4), the torch reference, a bf16 "
        "F.grouped_mm implementation and transformers' experts, side by side, with achieved HBM bandwidth and "
        "TFLOP/s against ceilings measured in the same run. On a CPU, set TRITON_INTERPRET=1 and use --shapes tiny "
        "or tiny-silu (a smoke test only).")
    moe.add_argument("--shapes", default="gpt-oss-20b,gpt-oss-120b",
                     help="comma-separated: gpt-oss-20b, gpt-oss-120b, qwen3-30b-a3b (128 experts top-8, hidden 2048, "
                     "moe_intermediate 768), mixtral-8x7b (8 experts top-2, 4096 / 14336), tiny, tiny-silu "
                     "(default: the first two)")
    moe.add_argument("--formats", default=None,
                     help="comma-separated weight formats among mxfp4, bf16, fp8, nvfp4 (default: all a shape "
                     "supports)")
    moe.add_argument("--tokens", default=",".join(map(str, (1, 4, 16, 64, 256, 1024, 4096, 8192))),
                     help="comma-separated token counts T (default 1,4,...,8192)")
    moe.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    moe.add_argument("--warmup", type=int, default=5, help="untimed calls first (default 5)")
    moe.add_argument("--iters", type=int, default=20, help="timed calls; the median is reported (default 20)")
    moe.add_argument("--no-baselines", action="store_true", help="time quickmoe only")
    moe.add_argument("--json", dest="json_out", metavar="FILE", help="write every figure as JSON")
    _add_common(moe)
    moe.set_defaults(func=cmd_bench_moe)

    att = bench_sub.add_parser(
        "attention", help="paged decode and prefill attention on gpt-oss shapes vs SDPA (CUDA)",
        description="Time quickmoe's paged attention kernels on gpt-oss shapes (64 query / 8 KV heads, head dim 64, "
        "sinks, windows 0 and 128, bf16) over a batch x context grid of decode steps and a few whole-prompt "
        "prefills, beside torch's scaled_dot_product_attention on the same data laid out contiguously: GB/s of the "
        "KV bytes read against the HBM bandwidth measured in the same run (decode), TFLOP/s (prefill).")
    att.add_argument("--batches", default="1,8,64,256", help="decode batch sizes (default 1,8,64,256)")
    att.add_argument("--contexts", default="1024,4096,16384", help="decode context lengths (default 1024,4096,16384)")
    att.add_argument("--windows", default="0,128", help="sliding windows, 0 = full attention (default 0,128)")
    att.add_argument("--prefill", default="1:1024,4:2048,1:8192",
                     help="prefill points BATCH:LENGTH, comma-separated (default 1:1024,4:2048,1:8192)")
    att.add_argument("--reps", type=int, default=20, help="kernel calls per timed CUDA graph (default 20)")
    att.add_argument("--json", dest="json_out", metavar="FILE", help="write every figure as JSON")
    _add_common(att)
    att.set_defaults(func=cmd_bench_attention)

    gb = bench_sub.add_parser(
        "generate", help="offline generation throughput and the batch-1 decode step vs its roofline",
        description="Time LLM.generate over N prompts of exactly --input-len random token ids, --output-len tokens "
        "each (greedy, EOS ignored): output tokens/s; then one request alone: the median decode step against the "
        "roofline (bytes a step reads over the HBM bandwidth measured in the same run). --baseline transformers "
        "runs transformers' generate on the same checkpoint and prompts in a fresh process, side by side.")
    gb.add_argument("model", metavar="DIR", help="checkpoint directory")
    gb.add_argument("--num-prompts", type=int, default=256, help="prompts (default 256)")
    gb.add_argument("--input-len", type=int, default=1000, help="prompt tokens (default 1000)")
    gb.add_argument("--output-len", type=int, default=1000, help="tokens generated per prompt (default 1000)")
    gb.add_argument("--decode-steps", type=int, default=64, help="batch-1 decode steps timed (default 64)")
    gb.add_argument("--baseline", default="none", choices=("none", "transformers"),
                    help="also run transformers' generate on the same checkpoint and prompts")
    gb.add_argument("--baseline-prompts", type=int, default=32,
                    help="prompts given to the baseline (the first of the same list; default 32)")
    gb.add_argument("--baseline-batch-size", type=int, default=32, help="the baseline's batch size (default 32)")
    gb.add_argument("--seed", type=int, default=0, help="prompt seed (default 0)")
    gb.add_argument("--json", dest="json_out", metavar="FILE", help="write every figure as JSON")
    _add_engine_args(gb)
    _add_common(gb)
    gb.set_defaults(func=cmd_bench_generate)
    _add_bench_serve_parser(bench_sub)
    _add_bench_quality_parser(bench_sub)

    _add_serve_parser(sub)

    info = sub.add_parser("info", help="validate and describe a checkpoint directory (config and tensors)",
                          description="Validate a checkpoint as `generate` does before it loads a weight (config.json, "
                          "the index, every shard header, and each tensor's name, shape and dtype against the "
                          "model's parameters) and summarise it, without loading weights. A problem ends with one "
                          "`error:` line and exit status 2.")
    info.add_argument("model", nargs="?", metavar="DIR", help="checkpoint directory (default: embedded tiny model)")
    _add_common(info)
    info.set_defaults(func=cmd_info)
    return parser


EPILOG_SERVE = """examples:
  quickmoe serve                                    # embedded tiny random model on CPU, http://127.0.0.1:8000
  quickmoe serve ./gpt-oss-20b --host 0.0.0.0 --port 8000 --api-key KEY --max-num-seqs 64
  curl localhost:8000/v1/chat/completions -H 'Content-Type: application/json' \\
       -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 32}'
"""


def _add_serve_parser(sub) -> None:
    serve = sub.add_parser(
        "serve", help="an OpenAI-compatible HTTP server (completions, chat, models, health, metrics)",
        description="Load a checkpoint directory and serve it over HTTP with the OpenAI API: POST /v1/completions "
        "and /v1/chat/completions (streaming with SSE or not; chat in the harmony format, reasoning returned as "
        "reasoning_content, apart from content), GET /v1/models, /health (200 once ready) and /metrics "
        "(Prometheus). With no DIR, the embedded tiny random model on CPU. The port is taken before the model "
        "loads; SIGTERM answers new requests 503 (the socket stays open), lets the ones in flight finish (up to "
        "--drain-timeout), then exits 0.",
        epilog=EPILOG_SERVE, formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("model", nargs="?", metavar="DIR", help="checkpoint directory (default: embedded tiny model)")
    g = serve.add_argument_group("server")
    g.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 for every interface)")
    g.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0: any free port)")
    g.add_argument("--api-key", default=None, metavar="KEY",
                   help="require 'Authorization: Bearer KEY' on /v1/* (401 otherwise); default: "
                   "$QUICKMOE_API_KEY when set, else no key. An empty or blank KEY (or $QUICKMOE_API_KEY) is an "
                   "error, never 'no key'")
    g.add_argument("--served-model-name", default=None, metavar="NAME",
                   help="the model name clients send and /v1/models lists (default: DIR as given, or "
                   "'quickmoe-tiny' for the embedded model)")
    g.add_argument("--max-waiting", type=int, default=256, metavar="N",
                   help="requests that may wait beyond the running batch (--max-num-seqs); more get 503 "
                   "(default 256)")
    g.add_argument("--drain-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="on SIGTERM, how long requests in flight may take to finish; then they end with a 503 "
                   "(or an error event and [DONE] in a stream) and their KV blocks are freed (default 60)")
    g.add_argument("--access-log", action="store_true", help="log every HTTP request")
    g.add_argument("--seed", type=int, default=0,
                   help="seed of the randomness given to requests that bring no seed of their own (default 0)")
    g.add_argument("--generation-config", default="auto", metavar="auto|vllm|DIR",
                   help="sampling defaults for fields a request leaves out: auto (the default) reads the model's "
                   "generation_config.json (temperature, top_p, top_k, min_p, repetition_penalty, max_new_tokens), DIR "
                   "another directory's, vllm none (temperature 1, no top-k/top-p limit)")
    vllm = serve.add_argument_group("vLLM flags (accepted as vLLM takes them where quickmoe does the same; refused "
                                    "with one line otherwise)")
    vllm.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1, help="only 1")
    vllm.add_argument("--data-parallel-size", "-dp", type=int, default=1, help="only 1")
    vllm.add_argument("--chat-template", default=None, help="refused: harmony (gpt-oss) and the checkpoint's own "
                      "template are used")
    vllm.add_argument("--enable-auto-tool-choice", action="store_true", help="accepted: tools are always on")
    vllm.add_argument("--tool-call-parser", default=None, help="accepted: openai (harmony's tool calls)")
    vllm.add_argument("--reasoning-parser", default=None, help="accepted: openai_gptoss (harmony's analysis channel)")
    vllm.add_argument("--trust-remote-code", action="store_true", help="refused: no remote code is ever run")
    g.add_argument("--enable-log-requests", action="store_true",
                   help="log each generation request (id, prompt tokens, sampling parameters) and its end")
    g.add_argument("--disable-log-stats", action="store_true",
                   help="no periodic stats line (throughput, running/waiting, KV cache and prefix cache hit rate; "
                   "default: every 10 s while requests run)")
    _add_engine_args(serve)
    _add_common(serve)
    serve.set_defaults(func=cmd_serve)


def _add_bench_serve_parser(bench_sub) -> None:
    bs = bench_sub.add_parser(
        "serve", help="load-test an OpenAI-compatible server: TTFT, ITL, E2E latency, throughput per concurrency",
        description="Send streamed /v1/completions requests to a running OpenAI-compatible server (quickmoe serve "
        "or any other): prompts of exactly --input-len random token ids, exactly --output-len tokens each (greedy, "
        "ignore_eos), at most C requests in flight for each C of --concurrency. Prints per level: requests, "
        "duration, input/generated tokens, request and token throughputs, mean/median/P99 TTFT, mean/median/P95/"
        "P99/max inter-token latency, TPOT, mean/median end-to-end latency; then an overview; --result-json "
        "writes everything.")
    bs.add_argument("--base-url", required=True, help="the server, e.g. http://127.0.0.1:8000 (a /v1 suffix is fine)")
    bs.add_argument("--model", default=None, help="model name to send (default: the first of GET /v1/models)")
    bs.add_argument("--concurrency", default="1,4,16,32", help="comma-separated levels (default 1,4,16,32)")
    bs.add_argument("--num-prompts", type=int, default=None,
                    help="requests per level (default: 4 x the level's concurrency, at least 8)")
    bs.add_argument("--input-len", type=int, default=1000, help="prompt tokens per request (default 1000)")
    bs.add_argument("--output-len", type=int, default=1000, help="tokens generated per request (default 1000)")
    bs.add_argument("--result-json", metavar="FILE", help="write the options and every level's figures as JSON")
    bs.add_argument("--api-key", default=None, metavar="KEY",
                    help="bearer token (default: $QUICKMOE_API_KEY, else $OPENAI_API_KEY, else none)")
    bs.add_argument("--seed", type=int, default=0, help="seed of the random prompts (default 0)")
    bs.add_argument("--token-range", default="1000,30000", metavar="LO,HI",
                    help="prompt token ids are drawn from [LO, HI) (default 1000,30000: ordinary tokens of any "
                    "common vocabulary)")
    bs.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per request (default 1800)")
    bs.add_argument("--no-warmup", action="store_true", help="skip the short unmeasured request sent first")
    bs.add_argument("--input-len-range", default=None, metavar="LO,HI",
                    help="mixed prompts: each request's length drawn uniformly from [LO, HI] (overrides --input-len)")
    bs.add_argument("--output-len-range", default=None, metavar="LO,HI",
                    help="mixed outputs: each request's max_tokens drawn uniformly from [LO, HI] (overrides "
                    "--output-len)")
    bs.add_argument("--disconnect-fraction", type=float, default=0.0, metavar="F",
                    help="this fraction of the requests is cut by the client after a random number of tokens "
                    "(counted apart, not as failures; default 0)")
    bs.add_argument("--shared-prefix-len", type=int, default=0, metavar="N",
                    help="every prompt starts with the same N random token ids before its own --input-len (a shared "
                    "system prompt: what prefix caching serves from its cache; default 0)")
    bs.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                    help="run each level for this long (each of the C clients sends request after request) instead "
                    "of --num-prompts requests")
    _add_common(bs)
    bs.set_defaults(func=cmd_bench_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from quickmoe.startup.report import StartupReport

    report = StartupReport.from_process_start()
    from quickmoe.startup.early_start import EarlyStart  # stdlib only: torch is not imported yet

    config = checked_inputs(args)["server"]  # torch-free: bad flags fail before anything loads
    from quickmoe.server.serve import bind_socket

    # a taken port fails now, not after the model loaded; under torchrun only rank 0 serves HTTP
    sock = None if _torchrun_follower() else bind_socket(config.host, config.port)
    device = "cpu" if args.model is None and args.device == "auto" else args.device
    early = EarlyStart.begin(args.model, device)
    spawned = _spawn_ranks_early(args, device)
    from quickmoe.llm import LLM
    from quickmoe.server.app import create_app
    from quickmoe.server.serve import run_server

    report.mark("imports")
    options = _engine_options(args)
    options["device"] = device
    llm = LLM(args.model, startup_report=report, progress=not args.quiet, early_start=early, seed=args.seed,
              spawned_ranks=spawned, **options)
    if _is_synthetic(llm.model_dir):
        logger.warning("%s has random weights (made by quickmoe make-checkpoint): the text is meaningless",
                       llm.model_dir)
    if args.generation_config != "vllm":
        from quickmoe.server.config import load_sampling_defaults

        source = llm.model_dir if args.generation_config == "auto" else Path(args.generation_config)
        config = dataclasses.replace(config, sampling_defaults=load_sampling_defaults(source))
    report.log()
    run_server(create_app(llm, config), config, sock)
    return 0


def _add_bench_quality_parser(bench_sub) -> None:
    bq = bench_sub.add_parser(
        "quality", help="held-out perplexity and greedy agreement between execution paths",
        description="Perplexity and next-token accuracy on held-out text (default: the embedded model's held-out "
        "stdlib files), then greedy agreement on prompts cut from it between pairs of execution paths (float32 vs "
        "bf16, alone vs batched, whole vs chunked prefill, prefix-cached vs not; on CUDA eager vs graphs vs compiled, "
        "torch vs Triton MoE): one table, a row per pair.")
    bq.add_argument("model", metavar="DIR", nargs="?", default=None, help="checkpoint directory (default: the "
                    "embedded model)")
    bq.add_argument("--heldout", metavar="FILE", help="held-out text: .jsonl of {path, text} or a text file")
    bq.add_argument("--num-prompts", type=int, default=64, help="prompts (default 64)")
    bq.add_argument("--prompt-len", type=int, default=64, help="prompt tokens (default 64)")
    bq.add_argument("--max-tokens", type=int, default=128, help="greedy tokens per prompt (default 128)")
    bq.add_argument("--window", type=int, default=256, help="perplexity window in tokens (default 256)")
    bq.add_argument("--eval-tokens", type=int, default=65536, help="held-out tokens evaluated (default 65536)")
    bq.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"),
                    help="the paths' dtype (auto: bfloat16 on CUDA, float32 on CPU); float32 vs bf16 is always a row")
    bq.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    bq.add_argument("--kv-cache-memory", type=parse_bytes, default=None, metavar="SIZE", help="KV cache size per path, e.g. 4GiB")
    bq.add_argument("--only", default="", help="comma-separated row labels (prefixes) to run; default all")
    bq.add_argument("--json", dest="json_out", metavar="FILE", help="write the report as JSON")
    _add_common(bq)
    bq.set_defaults(func=cmd_bench_quality)


def cmd_bench_quality(args: argparse.Namespace) -> int:
    from quickmoe.bench.quality import QualityBenchOptions, run_quality_bench

    run_quality_bench(QualityBenchOptions(
        model=str(args.model) if args.model else str(_default_dir()), heldout=args.heldout,
        num_prompts=args.num_prompts, prompt_len=args.prompt_len, max_tokens=args.max_tokens, window=args.window,
        eval_tokens=args.eval_tokens, dtype=args.dtype, device=args.device, kv_cache_memory=args.kv_cache_memory,
        only=tuple(o.strip() for o in args.only.split(",") if o.strip()), json_out=args.json_out))
    return 0


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
        shared_prefix_len=args.shared_prefix_len))
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from quickmoe.startup.report import StartupReport

    report = StartupReport.from_process_start()
    from quickmoe.startup.early_start import EarlyStart  # stdlib only: torch is not imported yet

    params = checked_inputs(args)["sampling"]  # torch-free: bad flags fail before anything starts
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


def cmd_bench_coldstart(args: argparse.Namespace) -> int:
    import shlex

    from quickmoe.bench.coldstart import ColdstartOptions, run_coldstart

    run_coldstart(ColdstartOptions(model=args.model, runs=args.runs, device=args.device,
                                   drop_caches=args.drop_caches, compare_uncached=args.compare_uncached,
                                   baseline=args.baseline, json_out=args.json_out, compile=args.compile,
                                   cuda_graphs=args.cuda_graphs, compile_compare=args.compile_compare,
                                   compare_cold_kernels=args.compare_cold_kernels,
                                   generate_args=_parallel_flags(args) + tuple(shlex.split(args.generate_args))))
    return 0


def _torchrun_follower() -> bool:
    """A rank > 0 under torchrun: it follows rank 0's steps inside LLM(...) and never serves or prints."""
    import os

    return os.environ.get("RANK", "0") != "0" and "WORLD_SIZE" in os.environ


def _spawn_ranks_early(args: argparse.Namespace, device: str):  # -> SpawnedRanks | None
    """With -tp N > 1 outside torchrun and a checkpoint given: start ranks 1..N-1 now, before torch is imported
    here, so their imports and loads overlap this process's (standard library only)."""
    import os

    if args.tensor_parallel_size <= 1 or args.model is None or "RANK" in os.environ:
        return None
    from quickmoe.config import EngineConfig
    from quickmoe.executor.spawn import spawn_ranks

    engine = EngineConfig(model=args.model, **{**_engine_options(args), "device": device})
    return spawn_ranks(args.model, engine)


def _parallel_flags(args: argparse.Namespace) -> tuple[str, ...]:
    """-tp / --enable-expert-parallel as the options every start of `bench coldstart` passes on."""
    from quickmoe.config import EngineConfig

    EngineConfig(tensor_parallel_size=args.tensor_parallel_size)  # a bad N fails here, as one line
    flags = ("--tensor-parallel-size", str(args.tensor_parallel_size)) if args.tensor_parallel_size != 1 else ()
    return flags + (("--enable-expert-parallel",) if args.enable_expert_parallel else ())


def _int_list(text: str, flag: str) -> tuple[int, ...]:
    """'1,4,16' -> (1, 4, 16); ConfigError naming the flag otherwise."""
    try:
        return tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise ConfigError(f"option {flag} = {text!r}: expected comma-separated integers") from None


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
        json_out=args.json_out))
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


def _default_dir() -> Path:
    from quickmoe.checkpoint.default_model import ensure_default_model

    return ensure_default_model()


def _is_synthetic(model_dir: Path) -> bool:
    try:
        return "quickmoe_synthetic" in json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return False


def setup_logging(verbose: bool = False, quiet: bool = False) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S",
                        stream=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose, args.quiet)
    try:
        return args.func(args)
    except QuickMoEError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

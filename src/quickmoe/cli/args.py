"""Options shared by the subcommands: the engine's flags, their checks, and what a command needs of them
(torch-free: a bad flag fails before anything heavy is imported)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from quickmoe.engine_config import KV_CACHE_LAYOUTS
from quickmoe.errors import ConfigError


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


def _graph_sizes(words: list[str] | None) -> tuple[int, ...] | None:
    """--cuda-graph-sizes' words, each '8' or '8,16,24' -> batch sizes (EngineConfig checks their range); a word
    that is not integers is a ConfigError naming the flag."""
    if words is None:
        return None
    try:
        return tuple(int(t) for word in words for t in word.split(",") if t.strip())
    except ValueError:
        raise ConfigError(f"option --cuda-graph-sizes = {' '.join(words)!r}: expected batch sizes such as "
                          "1 2 4 8 or 1,2,4,8 (it takes every word after it: put the model directory before it)"
                          ) from None


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
    g.add_argument("--kv-cache-layout", default="head-major", choices=KV_CACHE_LAYOUTS,
                   help="KV cache memory layout: each KV head's positions of a block contiguous (head-major, the "
                   "default) or a position's KV heads side by side (slot-major)")
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
    g.add_argument("--compile", default="off", choices=("off", "on", "aot"),
                   help="compile the decoder layers with torch.compile at start-up (one graph per layer kind, "
                   "cached under the quickmoe cache). Off by default: every op of a MoE layer is already one of "
                   "quickmoe's kernels or a library matmul, so Inductor generates no kernel of its own there and "
                   "the compile costs start-up time for nothing fused (a dense MLP layer's SiLU and product "
                   "aside). aot: through torch's AOT compile, each layer "
                   "kind's compiled forward saved and loaded by later starts without tracing (torch 2.13 has it; "
                   "refused on torches without it)")
    g.add_argument("--cuda-graphs", default="auto", choices=("auto", "on", "off"),
                   help="run decode steps in CUDA graphs, one per batch-size bucket (see --cuda-graph-sizes; auto, "
                   "the default: on CUDA; on: CUDA only)")
    g.add_argument("--cuda-graph-sizes", nargs="+", default=None, metavar="N",
                   help="the decode graphs' batch sizes, space- or comma-separated, each at most --max-num-seqs "
                   "(which is always captured); a step of B sequences replays the smallest size >= B (default: "
                   "1 2 4 8 16 32, then steps of 16 to 256 and of 32 beyond)")
    g.add_argument("--cuda-graphs-startup-max", type=int, default=8, metavar="N",
                   help="capture the buckets up to N at start-up, the larger ones when a step first needs them or "
                   "while the server is idle (default 8; --max-num-seqs or more: all at start-up)")
    g.add_argument("--cuda-graphs-prefill-tokens", type=int, default=8192, metavar="N",
                   help="with CUDA graphs, steps with prompt tokens (up to N tokens, any number of sequences) replay "
                   "graphs too, captured while the server is idle; they run eagerly until then (default 8192, "
                   "at most --max-num-batched-tokens; 0: prompt steps always run eagerly)")
    g.add_argument("--kernel-precompile", default="auto", choices=("auto", "off"),
                   help="auto (the default): on an empty or stale kernel cache, compile the Triton kernels that "
                   "start-up and the warm-up will launch in worker processes side by side first (as many as the "
                   "CPUs; QUICKMOE_COMPILE_WORKERS sets the count); off: compile each at its first launch, one "
                   "after another")
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
            stats_interval_s=None if args.disable_log_stats else 10.0, frontend_process=args.frontend_process == "on",
            enable_step_profile=args.enable_step_profile)
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
                kv_cache_layout=args.kv_cache_layout,
                kv_cache_memory=args.kv_cache_memory, gpu_memory_utilization=args.gpu_memory_utilization,
                moe_kernels=args.moe_kernels, attention_kernels=args.attention_kernels,
                compile="off" if args.enforce_eager else args.compile,
                cuda_graphs="off" if args.enforce_eager else args.cuda_graphs,
                cuda_graph_sizes=_graph_sizes(args.cuda_graph_sizes),
                cuda_graphs_startup_max=args.cuda_graphs_startup_max,
                cuda_graphs_prefill_tokens=args.cuda_graphs_prefill_tokens, kernel_precompile=args.kernel_precompile,
                enable_prefix_caching=args.enable_prefix_caching, tensor_parallel_size=args.tensor_parallel_size,
                enable_expert_parallel=args.enable_expert_parallel)


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


def _default_dir() -> Path:
    from quickmoe.checkpoint.default_model import ensure_default_model

    return ensure_default_model()


def _is_synthetic(model_dir: Path) -> bool:
    try:
        return "quickmoe_synthetic" in json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return False

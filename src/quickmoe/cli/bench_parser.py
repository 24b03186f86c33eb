"""The `quickmoe bench` subcommands' parsers (coldstart, moe, attention, generate, serve, quality): their flags and
help, added to the `quickmoe` parser by `cli/parser.py`."""

from __future__ import annotations

import argparse

from quickmoe.cli.args import _add_common, _add_engine_args, _add_parallel_args, parse_bytes
from quickmoe.cli.bench_commands import (
    cmd_bench_attention,
    cmd_bench_coldstart,
    cmd_bench_generate,
    cmd_bench_moe,
    cmd_bench_quality,
)
from quickmoe.cli.commands import cmd_bench_serve
from quickmoe.engine_config import KV_CACHE_LAYOUTS

__all__ = ["add_bench_parser"]


def add_bench_parser(sub) -> None:
    """`quickmoe bench` and its subcommands, on the top-level subparsers `sub`."""
    bench = sub.add_parser("bench", help="benchmarks (coldstart, moe, attention, generate, serve, quality)",
                           description="Benchmarks; see each subcommand.")
    bench_sub = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    cold = bench_sub.add_parser(
        "coldstart", help="process start -> first token, phase by phase, in fresh subprocesses",
        description="Run `quickmoe generate DIR --max-tokens 1` in N fresh processes and print min and median "
        "of every start-up phase and of weights_ready (process start -> weights resident and processed), the "
        "load rate against a pinned host->device copy measured in the same run, with the page-cache state; "
        "optionally with the PermutationCache off and with transformers' from_pretrained + one forward side by "
        "side. Every start has serve's default engine options (decode CUDA graphs on CUDA) and the persistent Triton "
        "kernel cache (filled by an untimed run first). The runs inherit the environment, so QUICKMOE_LOADER, "
        "QUICKMOE_PREFETCH=0, QUICKMOE_CUDA_PREINIT=0, QUICKMOE_TOKENIZER_RECOGNITION=0 and "
        "QUICKMOE_BYTECODE_CACHE=off compare start-up settings.")
    cold.add_argument("model", metavar="DIR", help="checkpoint directory")
    cold.add_argument("-n", "--runs", type=int, default=3, help="runs per configuration (default 3)")
    cold.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto)")
    cold.add_argument("--drop-caches", action="store_true",
                      help="drop the OS page cache before each run (Linux, root); default: warm page cache")
    cold.add_argument("--compare-uncached", action="store_true",
                      help="also run with the PermutationCache disabled and print the processing ratio")
    cold.add_argument("--baseline", default="none", choices=("none", "transformers"),
                      help="also time transformers' from_pretrained + one forward on the same checkpoint")
    cold.add_argument("--compile", nargs="?", const="on", default="off", choices=("off", "on", "aot"),
                      metavar="MODE",
                      help="also time starts with --compile MODE (on, the default when given bare, or aot): each with "
                      "fresh compile caches, then with warm ones")
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
    cold.add_argument("--import-floor", action="store_true",
                      help="also time `import torch` alone in fresh processes with the same environment (the same "
                      "bytecode cache) and print how much weights_ready adds to it")
    cold.add_argument("--compile-compare", metavar="DIR2",
                      help="with --compile: also time fresh-cache compiled starts of DIR2 (e.g. the same model made "
                      "with fewer layers) and print the ratio of the compile phases")
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
    att.add_argument("--batches", default="1,8,32,64,256", help="decode batch sizes (default 1,8,32,64,256)")
    att.add_argument("--contexts", default="1024,4096,16384", help="decode context lengths (default 1024,4096,16384)")
    att.add_argument("--windows", default="0,128", help="sliding windows, 0 = full attention (default 0,128)")
    att.add_argument("--prefill", default="1:1024,4:2048,1:8192,16:512",
                     help="prefill points BATCH:LENGTH, comma-separated (default 1:1024,4:2048,1:8192,16:512)")
    att.add_argument("--reps", type=int, default=20, help="kernel calls per timed CUDA graph (default 20)")
    att.add_argument("--kv-layout", choices=KV_CACHE_LAYOUTS, default="head-major",
                     help="memory layout of the paged cache: head-major (each KV head's rows of a block contiguous; "
                     "the engine's default) or slot-major (a block's rows hold every KV head side by side)")
    att.add_argument("--block-size", type=int, default=16, help="positions per cache block (default 16)")
    att.add_argument("--json", dest="json_out", metavar="FILE", help="write every figure as JSON")
    _add_common(att)
    att.set_defaults(func=cmd_bench_attention)

    gb = bench_sub.add_parser(
        "generate", help="offline generation throughput and the batch-1 decode step vs its roofline",
        description="Time LLM.generate over N prompts of exactly --input-len random token ids, --output-len tokens "
        "each (greedy, EOS ignored): output tokens/s; then one request alone: the median decode step against the "
        "roofline (bytes a step reads over the HBM bandwidth measured in the same run). On CUDA also the steps' GPU "
        "and exposed host time, and where the GPU time goes by op family (attention, moe, dense, other) in decode "
        "steps at batch 1 and at the run's batch size and in mixed steps (a prompt chunk beside decode rows). "
        "--baseline transformers runs transformers' generate on the same checkpoint and prompts in a fresh "
        "process, side by side.")
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
    bs.add_argument("--op-family-steps", type=int, default=0, metavar="N",
                    help="per level, once its first request has finished, ask the server (quickmoe serve "
                    "--enable-step-profile) to profile its next N engine steps and print their GPU time by op family "
                    "(attention, moe, dense, other) and kinds; the profiled steps run slower, so the level's "
                    "latencies include them (default 0: off)")
    _add_common(bs)
    bs.set_defaults(func=cmd_bench_serve)


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
    bq.add_argument("--kv-cache-memory", type=parse_bytes, default=None, metavar="SIZE",
                    help="KV cache size per path, e.g. 4GiB")
    bq.add_argument("--only", default="", help="comma-separated row labels (prefixes) to run; default all")
    bq.add_argument("--json", dest="json_out", metavar="FILE", help="write the report as JSON")
    _add_common(bq)
    bq.set_defaults(func=cmd_bench_quality)

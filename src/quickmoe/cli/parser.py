"""The argument parser of the `quickmoe` command: every subcommand, its flags and its help."""

from __future__ import annotations

import argparse

from quickmoe import __version__
from quickmoe.checkpoint.presets import PRESETS
from quickmoe.engine_config import KV_CACHE_LAYOUTS
from quickmoe.cli.args import (
    _add_common,
    _add_engine_args,
    _add_parallel_args,
    parse_bytes,
)
from quickmoe.cli.bench_commands import (
    cmd_bench_attention,
    cmd_bench_coldstart,
    cmd_bench_generate,
    cmd_bench_moe,
    cmd_bench_quality,
)
from quickmoe.cli.commands import (
    cmd_bench_serve,
    cmd_generate,
    cmd_info,
    cmd_make_checkpoint,
    cmd_serve,
)

EPILOG_GENERATE = """examples:
  quickmoe generate --prompt "def fibonacci(n):"     # the embedded model (trained on Python's stdlib) on CPU
  quickmoe generate ./gpt-oss-20b --chat --prompt "What is MoE?" --max-tokens 64
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quickmoe",
        description="quickmoe: a serving engine for Mixture-of-Experts LLMs (gpt-oss first), ready in seconds.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"quickmoe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    gen = sub.add_parser("generate", help="generate text from prompts with a local checkpoint",
                         description="Load a checkpoint directory and complete prompts. With no DIR, the embedded "
                         "model (a small gpt-oss trained on the Python standard library's source, shipped with "
                         "quickmoe) runs on CPU.",
                         epilog=EPILOG_GENERATE, formatter_class=argparse.RawDescriptionHelpFormatter)
    gen.add_argument("model", nargs="?", metavar="DIR", help="checkpoint directory (default: the embedded model)")
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
        "QUICKMOE_PREFETCH=0, QUICKMOE_CUDA_PREINIT=0, QUICKMOE_TOKENIZER_RECOGNITION=0 and QUICKMOE_BYTECODE_CACHE=off "
        "compare start-up settings.")
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
    info.add_argument("model", nargs="?", metavar="DIR", help="checkpoint directory (default: the embedded model)")
    _add_common(info)
    info.set_defaults(func=cmd_info)
    return parser


EPILOG_SERVE = """examples:
  quickmoe serve                                    # the embedded model on CPU, http://127.0.0.1:8000
  quickmoe serve ./gpt-oss-20b --host 0.0.0.0 --port 8000 --api-key KEY --max-num-seqs 64
  curl localhost:8000/v1/chat/completions -H 'Content-Type: application/json' \\
       -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 32}'
"""


def _add_serve_parser(sub) -> None:
    serve = sub.add_parser(
        "serve", help="an OpenAI-compatible HTTP server (completions, chat, models, health, metrics)",
        description="Load a checkpoint directory and serve it over HTTP with the OpenAI API: POST /v1/completions, "
        "/v1/chat/completions (streaming with SSE or not; tools; chat in the harmony format for gpt-oss, reasoning "
        "returned as reasoning (and reasoning_content), apart from content) and /v1/responses, /tokenize, "
        "/detokenize, GET /v1/models, /version, /health (200 once ready) and /metrics "
        "(Prometheus). With no DIR, the embedded model on CPU. The port is taken before the model "
        "loads; SIGTERM answers new requests 503 (the socket stays open), lets the ones in flight finish (up to "
        "--drain-timeout), then exits 0.",
        epilog=EPILOG_SERVE, formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("model", nargs="?", metavar="DIR", help="checkpoint directory (default: the embedded model)")
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
    g.add_argument("--frontend-process", choices=("on", "off"), default="on",
                   help="on (the default): the HTTP server (request parsing, JSON, streaming) runs in a process of "
                   "its own, started at once, and the engine's step loop in the process that loads the model, so "
                   "neither waits for the other's Python; off: both in one process")
    g.add_argument("--warmup", choices=("lazy", "eager", "auto"), default="auto",
                   help="the idle work: MoE kernels of every batch size, decode CUDA graphs past "
                   "--cuda-graphs-startup-max, prefill-shaped warm-up steps. auto (the default): before /health "
                   "reports ready when start-up compiled kernels (an empty or stale kernel cache: 23-30 s "
                   "for gpt-oss-20b on an H100, none with a warm one), else while no request runs; "
                   "eager: always before ready; lazy: while no request runs, or at first use, where a kernel "
                   "compiled on an empty kernel cache stalls the running requests for seconds")
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

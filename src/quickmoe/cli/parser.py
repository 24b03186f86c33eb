"""The argument parser of the `quickmoe` command: every subcommand, its flags and its help."""

from __future__ import annotations

import argparse

from quickmoe import __version__
from quickmoe.checkpoint.presets import PRESETS
from quickmoe.cli.args import _add_common, _add_engine_args
from quickmoe.cli.bench_parser import add_bench_parser
from quickmoe.cli.commands import cmd_generate, cmd_info, cmd_make_checkpoint, cmd_serve

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

    add_bench_parser(sub)

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
    g.add_argument("--enable-step-profile", action="store_true",
                   help="answer POST /profile_steps: a torch.profiler trace of the next engine steps' CUDA kernels, "
                   "their GPU time by op family (attention, moe, dense, communication, other); `bench serve "
                   "--op-family-steps N` asks for one per level. Off by default: the traced steps run slower")
    g.add_argument("--disable-log-stats", action="store_true",
                   help="no periodic stats line (throughput, running/waiting, KV cache and prefix cache hit rate; "
                   "default: every 10 s while requests run)")
    _add_engine_args(serve)
    _add_common(serve)
    serve.set_defaults(func=cmd_serve)

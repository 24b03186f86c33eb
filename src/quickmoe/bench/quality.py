"""`quickmoe bench quality DIR`: how good a model is on held-out text, and whether quickmoe's execution paths agree.

1. Perplexity and next-token accuracy on held-out text (by default the embedded model's held-out stdlib files),
   in windows of `window` tokens, through the runner in float32 and in the base dtype.
2. Greedy agreement between pairs of execution paths on the same prompts (cut from the held-out text), one row per
   pair (bench/quality_paths.py): float32 vs bf16, alone vs batched, whole vs chunked prefill, prefix-cached vs
   not, and on CUDA eager vs CUDA graphs vs compiled and the torch vs Triton MoE. Each row: prompts whose outputs
   are identical, the share of tokens identical until each prompt's first divergence, the largest log-probability
   difference before it (absolute, and relative to the largest log-probability magnitude compared) and the median
   top-1/top-2 margin of the reference where the paths diverged (small: a near tie, expected of rounding).
   Rows that need CUDA print "n/a (needs CUDA)" elsewhere.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from quickmoe.bench.quality_compare import Agreement, GreedyRun, compare
from quickmoe.bench.quality_data import HELDOUT_FILE
from quickmoe.bench.quality_data import prompts as make_prompts
from quickmoe.bench.quality_data import read_heldout, token_stream, windows
from quickmoe.bench.quality_paths import ExecPath, rows, run_path
from quickmoe.bench.quality_ppl import evaluate_perplexity
from quickmoe.errors import ConfigError

logger = logging.getLogger(__name__)
DTYPES = ("auto", "float32", "bfloat16")
CUDA_KV_CACHE_BYTES = 4 << 30


@dataclass(frozen=True)
class QualityBenchOptions:
    model: str
    heldout: str | None = None
    num_prompts: int = 64
    prompt_len: int = 64
    max_tokens: int = 128
    window: int = 256
    eval_tokens: int = 65536
    top_logprobs: int = 5
    dtype: str = "auto"
    device: str = "auto"
    kv_cache_memory: str | int | None = None
    only: tuple[str, ...] = ()  # row labels to run (prefixes); empty: all
    json_out: str | None = None

    def __post_init__(self) -> None:
        if not (Path(self.model) / "config.json").is_file():
            raise ConfigError(f"bench quality: {self.model} is not a checkpoint directory (no config.json)")
        for name in ("num_prompts", "prompt_len", "max_tokens", "window", "eval_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"bench quality option '{name}' = {value!r}: expected an integer >= 1")
        if not 0 <= self.top_logprobs <= 20:
            raise ConfigError(f"bench quality option 'top_logprobs' = {self.top_logprobs!r}: expected 0..20")
        if self.dtype not in DTYPES:
            raise ConfigError(f"bench quality option 'dtype' = {self.dtype!r}: expected one of {list(DTYPES)}")


def _base_dtype(opts: QualityBenchOptions, cuda: bool) -> str:
    if opts.dtype != "auto":
        return opts.dtype
    return "bfloat16" if cuda else "float32"


def run_quality_bench(opts: QualityBenchOptions) -> dict[str, Any]:
    import torch

    from quickmoe.tokenizer import load_tokenizer

    cuda = opts.device == "cuda" or (opts.device == "auto" and torch.cuda.is_available())
    dtype = _base_dtype(opts, cuda)
    heldout = opts.heldout
    if heldout is None and (Path(opts.model) / HELDOUT_FILE).is_file():  # a model that brings its own
        heldout = str(Path(opts.model) / HELDOUT_FILE)
    stream = token_stream(load_tokenizer(opts.model), read_heldout(heldout))
    eval_windows = windows(stream, opts.window, opts.eval_tokens)
    prompts = make_prompts(stream, opts.num_prompts, opts.prompt_len)
    extra: dict[str, Any] = {"device": "cuda" if cuda else "cpu",
                             "max_model_len": max(opts.window, opts.prompt_len + opts.max_tokens)}
    if opts.kv_cache_memory is not None:
        extra["kv_cache_memory"] = opts.kv_cache_memory
    elif cuda:  # not 90% of the GPU per path: the paths' engines are built one after another
        extra["kv_cache_memory"] = CUDA_KV_CACHE_BYTES
    perplexity: dict[str, dict] = {}
    runs: dict[tuple, GreedyRun] = {}

    def measure(path: ExecPath) -> GreedyRun:
        if path.key not in runs:
            engine = dict(path.engine)
            wants_ppl = engine["dtype"] not in perplexity and path.mode == "batched" \
                and engine.get("cuda_graphs") == "off" and "moe_kernels" not in engine
            on_llm = (lambda llm: perplexity.__setitem__(engine["dtype"], asdict(
                evaluate_perplexity(llm.runner, eval_windows)))) if wants_ppl else None
            logger.info("bench quality: %s (%d prompts x %d tokens)", path.name, len(prompts), opts.max_tokens)
            runs[path.key] = run_path(opts.model, path, prompts, opts.max_tokens, opts.top_logprobs, extra, on_llm)
        return runs[path.key]

    table = []
    for row in rows(dtype, opts.num_prompts):
        if opts.only and not any(row.label.startswith(o) for o in opts.only):
            continue
        entry: dict[str, Any] = {"pair": row.label, "a": row.a.name, "b": row.b.name}
        if row.needs_cuda and not cuda:
            entry["result"] = "n/a (needs CUDA)"
        else:
            agreement = compare(measure(row.a), measure(row.b))
            entry.update(asdict(agreement), token_agreement=agreement.token_agreement)
        table.append(entry)
    vocab = json.loads((Path(opts.model) / "config.json").read_text())["vocab_size"]
    for result in perplexity.values():
        result["perplexity"] = math.exp(result["nll"])
    report = {"model": opts.model, "device": extra["device"], "dtype": dtype, "heldout": heldout or "embedded",
              "eval_tokens": len(eval_windows) * (opts.window - 1), "window": opts.window,
              "uniform_perplexity": vocab, "perplexity": perplexity, "prompts": opts.num_prompts,
              "prompt_len": opts.prompt_len, "max_tokens": opts.max_tokens, "rows": table}
    print(format_report(report))
    if opts.json_out:
        Path(opts.json_out).write_text(json.dumps(report, indent=2) + "\n")
    return report


def format_report(report: dict[str, Any]) -> str:
    lines = [f"bench quality: {report['model']} on {report['device']}, base dtype {report['dtype']}",
             f"held-out ({report['heldout']}): {report['eval_tokens']} tokens in windows of {report['window']}; "
             f"uniform perplexity {report['uniform_perplexity']}"]
    for dtype, p in sorted(report["perplexity"].items()):
        lines.append(f"  {dtype:9s} perplexity {p['perplexity']:.3f}  next-token accuracy {100 * p['accuracy']:.2f}%")
    lines += [f"greedy agreement: {report['prompts']} prompts of {report['prompt_len']} tokens, "
              f"{report['max_tokens']} tokens each",
              "| pair (A vs B) | identical prompts | tokens agreeing until divergence | max abs dlogprob | rel | "
              "median margin at divergence |", "|---|---|---|---|---|---|"]
    for r in report["rows"]:
        if "result" in r:
            lines.append(f"| {r['pair']} | {r['result']} | | | | |")
            continue
        margin = "-" if r["median_margin_at_divergence"] is None else f"{r['median_margin_at_divergence']:.3g}"
        lines.append(f"| {r['pair']} | {r['identical_prompts']}/{r['prompts']} | {100 * r['token_agreement']:.2f}% "
                     f"({r['agreeing_tokens']}/{r['tokens']}) | {r['max_abs']:.3g} | {r['max_rel']:.3g} | {margin} |")
    return "\n".join(lines)


__all__ = ["Agreement", "QualityBenchOptions", "format_report", "run_quality_bench"]

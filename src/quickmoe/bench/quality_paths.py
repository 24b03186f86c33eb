"""The execution paths `bench quality` compares, and one greedy run of a path.

A path is a set of engine options plus how the prompts are submitted: all at once (`batched`: one batch of every
prompt), one after another (`alone`), or twice with the second pass measured (`cached`: its prompts' full KV blocks
come from the prefix cache). The base path is eager (no CUDA graphs, no compile), whole prefill, the default
kernels, in the base dtype; each row of the table changes one thing.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any

from quickmoe.bench.quality_compare import GreedyRun

MODES = ("batched", "alone", "cached")
WHOLE_PREFILL = 8192  # tokens a prompt may prefill in one step (whole prefill for the prompts used here)
CHUNK = 16  # the chunked path's prefill chunk


@dataclass(frozen=True)
class ExecPath:
    name: str
    engine: tuple[tuple[str, Any], ...]
    mode: str = "batched"
    needs_cuda: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"path {self.name!r}: mode {self.mode!r}, expected one of {MODES}")

    @property
    def key(self) -> tuple:
        return tuple(sorted(self.engine)), self.mode


@dataclass(frozen=True)
class Row:
    """One line of the table: path B against the reference path A."""

    label: str
    a: ExecPath
    b: ExecPath

    @property
    def needs_cuda(self) -> bool:
        return self.a.needs_cuda or self.b.needs_cuda


def _path(name: str, dtype: str, mode: str = "batched", needs_cuda: bool = False, **changes: Any) -> ExecPath:
    engine = {"dtype": dtype, "cuda_graphs": "off", "compile": "off", "max_num_batched_tokens": WHOLE_PREFILL,
              "long_prefill_token_threshold": WHOLE_PREFILL, "enable_prefix_caching": False, **changes}
    return ExecPath(name, tuple(sorted(engine.items())), mode, needs_cuda)


def rows(dtype: str, num_prompts: int) -> list[Row]:
    """The table's rows for base dtype `dtype` ("float32" or "bfloat16")."""
    base = _path(f"eager {dtype}", dtype)
    graphs = _path(f"CUDA graphs {dtype}", dtype, needs_cuda=True, cuda_graphs="on")
    return [
        Row("float32 vs bf16", _path("eager float32", "float32"), _path("eager bfloat16", "bfloat16")),
        Row(f"alone vs batch of {num_prompts}", _path(f"alone {dtype}", dtype, "alone"), base),
        Row("whole vs chunked prefill", base, _path(f"chunked prefill ({CHUNK}) {dtype}", dtype,
                                                     long_prefill_token_threshold=CHUNK)),
        Row("not cached vs prefix-cached", base, _path(f"prefix-cached {dtype}", dtype, "cached",
                                                                enable_prefix_caching=True)),
        Row("eager vs CUDA graphs", base, graphs),
        Row("eager vs compiled", base, _path(f"compiled {dtype}", dtype, needs_cuda=True, compile="on")),
        Row("torch MoE vs Triton MoE", _path(f"torch MoE {dtype}", dtype, needs_cuda=True, moe_kernels="torch"),
            _path(f"Triton MoE {dtype}", dtype, needs_cuda=True, moe_kernels="triton")),
        Row(f"graphs: alone vs batch of {num_prompts}",
            _path(f"CUDA graphs alone {dtype}", dtype, "alone", needs_cuda=True, cuda_graphs="on"), graphs),
    ]


def run_path(model_dir: str, path: ExecPath, prompts: list[list[int]], max_tokens: int, top_logprobs: int,
             engine_extra: dict[str, Any], on_llm=None) -> GreedyRun:
    """Greedy outputs of `prompts` on a fresh LLM built with the path's options (plus `engine_extra`: device,
    cache sizes); `on_llm(llm)` runs first (the perplexity measurement)."""
    import torch

    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    options = {**engine_extra, **dict(path.engine)}
    options.setdefault("max_num_seqs", max(len(prompts), 1))
    llm = LLM(model_dir, **options)
    try:
        if on_llm is not None:
            on_llm(llm)
        params = SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True, logprobs=top_logprobs)
        llm.generate(prompts[:1], SamplingParams(max_tokens=2, temperature=0, ignore_eos=True))  # warm-up
        t0 = time.perf_counter()
        if path.mode == "alone":
            outs = [llm.generate([p], params)[0] for p in prompts]
        else:
            if path.mode == "cached":
                llm.generate(prompts, params)  # fills the prefix cache
                t0 = time.perf_counter()
            outs = llm.generate(prompts, params)
        seconds = time.perf_counter() - t0
        tokens = tuple(tuple(o.token_ids) for o in outs)
        top = tuple(tuple({**dict(lp.top), lp.token_id: lp.logprob} for lp in (o.logprobs or ())) for o in outs)
        return GreedyRun(tokens, top, seconds)
    finally:
        del llm
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

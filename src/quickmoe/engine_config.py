"""How to run a model (`EngineConfig`): device, precision, kernels, compile, CUDA graphs, scheduling and KV
cache sizes, validated at construction (every bad option raises ConfigError naming it and the valid choices)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quickmoe.errors import ConfigError

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16")
MOE_KERNELS = ("auto", "torch", "triton")
COMPILE_MODES = ("off", "on", "aot")
CUDA_GRAPH_MODES = ("auto", "off", "on")
KERNEL_PRECOMPILE_MODES = ("auto", "off")


KV_BLOCK_SIZES = (16, 32, 64, 128)
KV_CACHE_LAYOUTS = ("head-major", "slot-major")  # executor/kv_cache.py, kernels/paged_kv_tile.py
SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed takes
CPU_LONG_PREFILL_TOKENS = 128  # the default prefill chunk cap on a CPU (EngineConfig.long_prefill_token_threshold)


@dataclass(frozen=True)
class EngineConfig:
    """How to run a model: where, in which precision, and how much context, batch and cache to allow.

    `model` None means the embedded default (the trained demo model shipped in the package).
    `device` auto picks CUDA when available; `dtype` auto is bfloat16 on CUDA and float32 on CPU.
    `moe_kernels` / `attention_kernels`: "triton" runs the MoE experts / the paged attention with the Triton
    kernels, "torch" with their torch references; "auto" (the default) is "triton" on CUDA when triton is
    installed, else "torch" (`resolved_kernels`).
    `compile`: "on" compiles the decoder layers with torch.compile at start-up (one graph per layer kind,
    cached on disk: executor/compile.py); "aot" does the same through torch's AOT compile, each layer kind's
    compiled forward saved so that later starts load it without tracing (executor/aot_layers.py; a torch with
    it, 2.13 has); "off" (the default; `--enforce-eager` on the command line) runs eagerly. Off by default
    because a compiled MoE layer fuses nothing: every op in it is a quickmoe custom op or a library matmul (the
    compiled graph of the embedded model holds no kernel Inductor generated, 2026-12-01; a dense MLP layer's SiLU
    and product are the exception), and it combines the MoE outputs inside the experts' op where the eager layer
    folds the combine into the next norm. `cuda_graphs`: "on" captures the decode step in CUDA graphs for
    batch-size buckets (executor/cuda_graphs.py; CUDA only); "auto" (the default) does so on CUDA; "off" decodes
    eagerly. `cuda_graph_sizes`: the buckets' batch sizes (None, the default: powers of two up to 32, then steps
    of 16 to 256 and of 32 beyond, executor/cuda_graphs.py `decode_buckets`; max_num_seqs is always one, so that
    every decode step has a graph). The buckets up to `cuda_graphs_startup_max` (8) are captured at start-up, larger
    ones when a step first needs them or while the server is idle (max_num_seqs or more: all at start-up).
    With graphs on, steps that carry prompt tokens (prefills, and prompt chunks beside decode rows) of up to
    `cuda_graphs_prefill_tokens` tokens (8192; 0: none) over any number of sequences replay graphs too, of
    token-count and sequence-count buckets, captured only while the server is idle (executor/prefill_graphs.py):
    run eagerly, such a step is bound by the host's kernel launches, not by the GPU.
    `kernel_precompile`: "auto" (the default) compiles the Triton kernels that start-up and the idle work will launch
    and the kernel cache lacks in worker processes side by side, before the first of them launches
    (executor/kernel_precompile.py; nothing to do with a warm cache); "off" compiles each at its first launch.
    Scheduling: at most `max_num_seqs` sequences run at once and one step computes at most
    `max_num_batched_tokens` tokens (long prompts are prefilled in chunks). `long_prefill_token_threshold`: the
    most prompt tokens one sequence prefills in one step, so that running decodes and new requests are never held
    up by more than one such chunk (None: CPU_LONG_PREFILL_TOKENS on a CPU, a quarter of max_num_batched_tokens
    on CUDA; `resolved_long_prefill_token_threshold`). `max_model_len` (prompt + output
    tokens; default: the model's max_position_embeddings, capped to what the KV cache holds) bounds a request.
    KV cache: blocks of `block_size` positions, each KV head's positions of a block contiguous (`kv_cache_layout`
    "head-major", the default: measured faster on the H100 at large batches, docs/benchmarks.md) or the heads of a
    position side by side ("slot-major"); its size is `kv_cache_memory` bytes when given, else on CUDA
    what `gpu_memory_utilization` of the GPU leaves after the weights and the activations of a full step, else
    (CPU) 1 GiB; `num_kv_blocks` sets the full-attention group's block count directly (tests, tuning).
    `enable_prefix_caching` (on by default): full KV blocks are reused across requests sharing a prefix.
    `tensor_parallel_size` N > 1 spreads the model over N processes, one per GPU (spawned by quickmoe, or
    torchrun's): attention heads, dense layers, the vocabulary and each expert's intermediate dimension split
    across them; with `enable_expert_parallel` the MoE layers give each rank whole experts instead.
    """

    model: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    max_model_len: int | None = None
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    seed: int = 0
    moe_kernels: str = "auto"
    attention_kernels: str = "auto"
    compile: str = "off"
    cuda_graphs: str = "auto"
    cuda_graph_sizes: tuple[int, ...] | None = None
    cuda_graphs_startup_max: int = 8
    cuda_graphs_prefill_tokens: int = 8192
    kernel_precompile: str = "auto"
    block_size: int = 16
    kv_cache_layout: str = "head-major"
    kv_cache_memory: int | None = None
    gpu_memory_utilization: float = 0.9
    num_kv_blocks: int | None = None
    long_prefill_token_threshold: int | None = None
    enable_prefix_caching: bool = True
    tensor_parallel_size: int = 1
    enable_expert_parallel: bool = False

    def resolved_long_prefill_token_threshold(self, device_type: str) -> int:
        """The prefill chunk cap on a device of `device_type` ("cpu", "cuda"): the option when set, else
        CPU_LONG_PREFILL_TOKENS on a CPU (a token costs ~1 ms there on the tiny model) and a quarter of the step's
        budget on CUDA; never more than max_num_batched_tokens."""
        if self.long_prefill_token_threshold is not None:
            chosen = self.long_prefill_token_threshold
        elif device_type == "cuda":
            chosen = max(self.max_num_batched_tokens // 4, 1)
        else:
            chosen = CPU_LONG_PREFILL_TOKENS
        return min(chosen, self.max_num_batched_tokens)

    def resolved_cuda_graphs(self, device: torch.device) -> bool:
        """Whether decode steps run in CUDA graphs on `device` ("auto": on CUDA)."""
        return self.cuda_graphs == "on" or (self.cuda_graphs == "auto" and device.type == "cuda")

    def resolved_kernels(self, which: str, device: torch.device) -> str:
        """"triton" or "torch" for `which` ("moe_kernels" or "attention_kernels") on `device`. An explicit
        "triton" needs triton installed and a CUDA device (or TRITON_INTERPRET=1: Triton's CPU interpreter, for
        tests); else ConfigError, rather than a silent fallback or a traceback from Triton's driver."""
        import importlib.util

        choice = getattr(self, which)
        has_triton = importlib.util.find_spec("triton") is not None
        if choice == "triton":
            if not has_triton:
                raise ConfigError(f"engine option '{which}' = 'triton': triton is not installed (expected 'auto' or "
                                  "'torch', or `pip install triton`)")
            if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
                raise ConfigError(f"engine option '{which}' = 'triton' needs a CUDA device; the model runs on "
                                  f"{device.type} (expected 'auto' or 'torch' there, or TRITON_INTERPRET=1 for "
                                  "Triton's CPU interpreter)")
        if choice != "auto":
            return choice
        return "triton" if device.type == "cuda" and has_triton else "torch"

    def __post_init__(self) -> None:
        def fail(name: str, expected: str) -> ConfigError:
            return ConfigError(f"engine option '{name}' = {getattr(self, name)!r}: expected {expected}")

        def is_int(value: object) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        if not isinstance(self.device, str) or (self.device not in DEVICES and not self.device.startswith("cuda:")):
            raise fail("device", f"one of {list(DEVICES)} or 'cuda:N'")
        if not is_int(self.tensor_parallel_size) or self.tensor_parallel_size < 1:
            raise fail("tensor_parallel_size", "an integer >= 1 (the number of GPUs / processes)")
        if not isinstance(self.enable_expert_parallel, bool):
            raise fail("enable_expert_parallel", "True or False")
        if self.dtype not in DTYPES:
            raise fail("dtype", f"one of {list(DTYPES)}")
        if self.max_model_len is not None and (not is_int(self.max_model_len) or self.max_model_len < 2):
            raise fail("max_model_len", "an integer >= 2")
        for name in ("moe_kernels", "attention_kernels"):
            if getattr(self, name) not in MOE_KERNELS:
                raise fail(name, f"one of {list(MOE_KERNELS)}")
        if self.compile not in COMPILE_MODES:
            raise fail("compile", f"one of {list(COMPILE_MODES)}")
        if self.cuda_graphs not in CUDA_GRAPH_MODES:
            raise fail("cuda_graphs", f"one of {list(CUDA_GRAPH_MODES)}")
        if self.kernel_precompile not in KERNEL_PRECOMPILE_MODES:
            raise fail("kernel_precompile", f"one of {list(KERNEL_PRECOMPILE_MODES)}")
        if self.cuda_graph_sizes is not None:
            sizes = self.cuda_graph_sizes
            if not isinstance(sizes, (tuple, list)) or not sizes or not all(is_int(b) and b >= 1 for b in sizes):
                raise fail("cuda_graph_sizes", "None or a non-empty list of batch sizes >= 1")
            if max(sizes) > self.max_num_seqs:
                raise ConfigError(f"engine option 'cuda_graph_sizes' = {list(sizes)}: batch size {max(sizes)} is "
                                  f"more than max_num_seqs = {self.max_num_seqs} (expected sizes up to it; "
                                  "max_num_seqs is always captured)")
            object.__setattr__(self, "cuda_graph_sizes", tuple(sorted(set(sizes))))
        if not is_int(self.cuda_graphs_startup_max) or self.cuda_graphs_startup_max < 1:
            raise fail("cuda_graphs_startup_max", "an integer >= 1")
        if not is_int(self.cuda_graphs_prefill_tokens) or self.cuda_graphs_prefill_tokens < 0:
            raise fail("cuda_graphs_prefill_tokens", "an integer >= 0 (0: prompt steps run eagerly)")
        if not is_int(self.max_num_seqs) or self.max_num_seqs < 1:
            raise fail("max_num_seqs", "an integer >= 1")
        if not is_int(self.max_num_batched_tokens) or self.max_num_batched_tokens < 1:
            raise fail("max_num_batched_tokens", "an integer >= 1")
        if self.block_size not in KV_BLOCK_SIZES:
            raise fail("block_size", f"one of {list(KV_BLOCK_SIZES)}")
        if self.kv_cache_layout not in KV_CACHE_LAYOUTS:
            raise fail("kv_cache_layout", f"one of {list(KV_CACHE_LAYOUTS)}")
        if self.kv_cache_memory is not None and (not is_int(self.kv_cache_memory) or self.kv_cache_memory < 1):
            raise fail("kv_cache_memory", "a number of bytes >= 1")
        if isinstance(self.gpu_memory_utilization, bool) or not isinstance(self.gpu_memory_utilization, (int, float)) \
                or not 0 < self.gpu_memory_utilization <= 1:
            raise fail("gpu_memory_utilization", "a fraction in (0, 1]")
        if self.num_kv_blocks is not None and (not is_int(self.num_kv_blocks) or self.num_kv_blocks < 1):
            raise fail("num_kv_blocks", "an integer >= 1")
        if self.long_prefill_token_threshold is not None and (not is_int(self.long_prefill_token_threshold)
                                                              or self.long_prefill_token_threshold < 1):
            raise fail("long_prefill_token_threshold", "None or an integer >= 1")
        if not isinstance(self.enable_prefix_caching, bool):
            raise fail("enable_prefix_caching", "true or false")
        if not is_int(self.seed) or not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]:
            raise fail("seed", f"an integer in [{SEED_RANGE[0]}, {SEED_RANGE[1]}]")
        if self.model is not None and not isinstance(self.model, str):
            raise fail("model", "None or a checkpoint directory")

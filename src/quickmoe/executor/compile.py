"""Regional compilation: each decoder layer compiled with torch.compile, one graph per layer *kind*.

All decoder layers share one forward (`models/decoder.py` `DecoderLayer.forward`); torch.compile treats a module's
parameters as graph inputs, and the layer takes its KV caches and the step's metadata as arguments
(`AttentionMetadata`: tensors only), with MoE, KV writes and attention as custom ops
(`forward/custom_ops.py`: tensors and plain numbers). So the graphs differ only where the layers do:
gpt-oss compiles one graph for its sliding-window layers and one for its full-attention layers, whatever
the depth, and nothing assumes the order in which layers run or that every layer runs every step.

Caches: Inductor's and Triton's on-disk caches live under `<quickmoe cache>/compile/<key>/`, the key
hashing what invalidates them (the model's config.json, dtype, device name, quickmoe, torch and triton
versions). A warm start reuses them; `CompileStats` says how many graphs were compiled and how many of
Inductor's graph-cache lookups hit.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from quickmoe.paths import cache_dir

__all__ = ["CompileStats", "compile_cache_dir", "compile_decoder_layers", "compile_stats", "use_compile_caches"]

logger = logging.getLogger(__name__)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def compile_cache_dir(model_config_json: dict, dtype: torch.dtype, device: torch.device) -> Path:
    """`<cache>/compile/<key>` ($QUICKMOE_COMPILE_CACHE_DIR/<key> when set): key = sha256 of the model
    config, dtype, device name and the versions."""
    from quickmoe import __version__

    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    what = {"config": model_config_json, "dtype": str(dtype), "device": device_name, "quickmoe": __version__,
            "torch": torch.__version__, "triton": _version("triton")}
    key = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:24]
    root = os.environ.get("QUICKMOE_COMPILE_CACHE_DIR")
    return (Path(root) if root else cache_dir() / "compile") / key


def use_compile_caches(path: Path) -> None:
    """Point Inductor's and Triton's caches at `path` (before the first compilation of the process)."""
    path.mkdir(parents=True, exist_ok=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(path / "triton")
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = True


@dataclass(frozen=True)
class CompileStats:
    """Totals since process start: graphs Dynamo compiled, Inductor graph-cache hits and misses, and the
    seconds torch reports for Dynamo (tracing and guards), the backend (AOTAutograd + Inductor, including
    cache loads) and, within it, loading compiled graphs from the cache."""

    graphs: int
    cache_hits: int
    cache_misses: int
    dynamo_s: float = 0.0
    backend_s: float = 0.0
    cache_load_s: float = 0.0

    @property
    def warm(self) -> bool:
        return self.cache_hits > 0 and self.cache_misses == 0


def compile_stats() -> CompileStats:
    from torch._dynamo.utils import compilation_time_metrics, counters

    def seconds(key: str) -> float:
        return float(sum(compilation_time_metrics.get(key, ())))

    backend = seconds("OutputGraph.call_user_compiler")
    return CompileStats(graphs=int(counters["stats"]["unique_graphs"]),
                        cache_hits=int(counters["inductor"]["fxgraph_cache_hit"]),
                        cache_misses=int(counters["inductor"]["fxgraph_cache_miss"]),
                        dynamo_s=max(seconds("_compile.compile_inner") - backend, 0.0), backend_s=backend,
                        cache_load_s=seconds("AOTAutogradCache.inductor_load"))


def compile_decoder_layers(layers: torch.nn.ModuleList, *, backend: str = "inductor") -> None:
    """Compile every layer in place (`nn.Module.compile`), with dynamic token and batch sizes. They share
    one code object, so Dynamo's cache serves all layers of a kind from the first one compiled.

    Two process-wide shape settings keep one graph per kind for every step: sizes of 1 are not
    specialized (`backed_size_oblivious`: a 1-token decode and a 1-sequence batch reuse the general graph)
    and equal sizes are not assumed equal forever (`use_duck_shape` off: a cache with as many slots as KV
    heads must not tie the two)."""
    import torch.fx.experimental._config as fx_config

    fx_config.backed_size_oblivious = True
    fx_config.use_duck_shape = False
    for layer in layers:
        layer.compile(backend=backend, dynamic=True, fullgraph=True)

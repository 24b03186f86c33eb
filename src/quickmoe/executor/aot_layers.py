"""Decoder layers compiled ahead of time (`--compile aot`): each layer kind's compiled forward saved once, loaded by
later starts, which then neither trace with Dynamo nor look up Inductor's caches.

torch's AOT compile (`torch.compile(fn, fullgraph=True, dynamic=True).aot_compile(example_inputs)` in torch 2.13;
the GPU machine's torch 2.11 lacks it, and `--compile aot` there is a clear error before the weights load)
returns a function holding Dynamo's output, its guards and the compiled graph, which `save_compiled_function` writes
and `torch.compiler.load_compiled_function` reads back. Here:
- one warm-up step runs eagerly with every layer's arguments captured;
- each artifact on disk is loaded under inference mode (its guards are rebuilt at the load in the thread's state,
  and the runner calls the layers in inference mode); a layer takes the first artifact whose guards accept its
  arguments, and a layer that none accepts is compiled and its artifact saved: one per layer kind (gpt-oss: sliding
  and full attention), whatever the depth;
- every call checks the artifact's guards; a call they refuse (a case the trace did not cover) runs the eager
  forward, logged once.
The artifacts embed Dynamo's bytecode of quickmoe's forwards, so their directory is keyed by quickmoe's own sources
as well as the compile cache's key (model config, dtype, device, versions).

On the development machine (torch 2.13, the embedded model) a layer kind loaded in 0.9 s, imports included, where
the warm `--compile on` phase took 3.2 s (docs/benchmarks.md, Cold start II, 2026-11-27).
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

import torch

from quickmoe.errors import ConfigError
from quickmoe.sources import sources_digest

__all__ = ["aot_available", "aot_directory", "install_aot_layers", "require_aot"]

logger = logging.getLogger(__name__)

AOT_FORMAT = 1  # bump when what is saved, or how it is chosen, changes


def aot_available() -> bool:
    """Whether this torch has the AOT compile and its loader: torch 2.13 has `aot_compile` on a compiled function;
    the GPU machine's 2.11 has not. (2.11 has the entry point beneath that method,
    `torch._dynamo.aot_compile.aot_compile_fullgraph`, but it refuses Inductor's output there, "does not implement
    SerializableCallable", even with the functorch settings 2.13 sets around it: checked on the H100 on 2026-11-27 with
    scripts/probes/aot_api_probe.py.)"""
    if not hasattr(torch.compiler, "load_compiled_function"):
        return False
    return hasattr(torch.compile(_probe_function, fullgraph=True, dynamic=True), "aot_compile")


def _probe_function(x):
    return x


def require_aot() -> None:
    """Raise the ConfigError of `--compile aot` on a torch without the AOT compile (checked before the weights load)."""
    if not aot_available():
        raise ConfigError(f"engine option 'compile' = 'aot': torch {torch.__version__} has no AOT compile "
                          "(torch.compile(...).aot_compile and torch.compiler.load_compiled_function); expected a torch "
                          "that has both (2.13 does), or compile 'on'")


def _sources_hash() -> str:
    """sha256 of quickmoe's Python sources (`sources.sources_digest`) and AOT_FORMAT."""
    return hashlib.sha256(f"aot-format-{AOT_FORMAT}-{sources_digest()}".encode()).hexdigest()[:16]


def aot_directory(compile_cache: Path) -> Path:
    """Where the artifacts of this model and build live: `<compile cache>/aot/<sources hash>`."""
    return compile_cache / "aot" / _sources_hash()


class _AOTForward:
    """A layer's forward through its artifact while the guards accept the call, else the eager forward."""

    def __init__(self, layer: torch.nn.Module, compiled) -> None:
        self.layer = layer
        self.compiled = compiled
        self.eager = type(layer).forward
        self.refused = 0

    def __call__(self, *args, **kwargs):
        if self.compiled.guard_check(self.layer, *args, **kwargs):
            return self.compiled(self.layer, *args, **kwargs)
        if not self.refused:
            logger.warning("a compiled decoder layer's guards refused a call; it runs eagerly (logged once per layer)")
        self.refused += 1
        return self.eager(self.layer, *args, **kwargs)


def _capture_layer_args(runner, step) -> list[tuple[tuple, dict]]:
    """Run one step eagerly through `runner.execute`; every layer's (args, kwargs) of that step."""
    layers = runner.model.model.layers
    captured: list = [None] * len(layers)

    def hook(index):
        def record(module, args, kwargs):
            captured[index] = (args, kwargs)
        return record

    handles = [layer.register_forward_pre_hook(hook(i), with_kwargs=True) for i, layer in enumerate(layers)]
    try:
        tokens, starts = step
        lengths = [start + len(toks) for toks, start in zip(tokens, starts)]
        runner.execute(tokens, starts, runner.scratch_block_tables(lengths))
    finally:
        for handle in handles:
            handle.remove()
    missing = [i for i, c in enumerate(captured) if c is None]
    assert not missing, f"layers {missing} did not run in the capture step"
    return captured


def install_aot_layers(runner, directory: Path, step) -> dict:
    """Give every decoder layer of `runner` a forward through an AOT-compiled artifact of its kind (loaded from
    `directory`, or compiled there). `step`: the (token lists, start positions) run eagerly to capture the layers'
    arguments. Returns the report's `info.compile.aot`."""
    require_aot()
    directory.mkdir(parents=True, exist_ok=True)
    t_capture = time.perf_counter()
    layer_args = _capture_layer_args(runner, step)
    t0 = time.perf_counter()
    artifacts = []
    for path in sorted(directory.glob("kind-*.bin")):
        try:
            with open(path, "rb") as f, torch.inference_mode():
                compiled = torch.compiler.load_compiled_function(f)
        except Exception as exc:  # noqa: BLE001 (a cache entry: one that cannot be read is compiled again)
            logger.warning("AOT artifact %s could not be loaded (%s: %s); its layer kind is compiled again", path,
                           type(exc).__name__, exc)
            break  # the kinds after it are renumbered: compiled again too
        compiled.disable_guard_check()  # _AOTForward checks them itself, falling back instead of raising
        artifacts.append(compiled)
    loaded, load_s = len(artifacts), time.perf_counter() - t0
    compile_s, chosen = 0.0, []
    layers = runner.model.model.layers
    with torch.inference_mode():
        for layer, (args, kwargs) in zip(layers, layer_args):
            compiled = next((c for c in artifacts if c.guard_check(layer, *args, **kwargs)), None)
            if compiled is None:  # a kind no artifact covers yet: compile it and save its artifact
                t1 = time.perf_counter()
                fn = torch.compile(type(layer).forward, fullgraph=True, dynamic=True)
                compiled = fn.aot_compile(((layer, *args), kwargs))
                compiled.save_compiled_function(str(directory / f"kind-{len(artifacts)}.bin"))
                compiled.disable_guard_check()
                artifacts.append(compiled)
                compile_s += time.perf_counter() - t1
            chosen.append(artifacts.index(compiled))
    for layer, index in zip(layers, chosen):
        layer.forward = _AOTForward(layer, artifacts[index])  # the instance's forward: nn.Module.__call__ runs it
    return {"directory": str(directory), "artifacts_loaded": loaded, "artifacts_compiled": len(artifacts) - loaded,
            "capture_step_s": round(t0 - t_capture, 4), "load_s": round(load_s, 4), "compile_s": round(compile_s, 4),
            "kind_of_layer": chosen}

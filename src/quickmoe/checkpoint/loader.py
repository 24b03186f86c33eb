"""Fill a built model's parameters from a checkpoint, through each parameter's `weight_loader`.

Every header is validated against the model before any data is read. Then the shards are streamed in
file order: `plan_chunks` cuts them into large reads, a `ChunkRing` of a few reader threads `preadv`s
them into a small ring of host buffers (page-locked when the parameters are on a GPU), and a transfer
moves each chunk's bytes to the parameters (on CUDA: asynchronous copies on their own stream, overlapping
the next reads). A `ParameterSink` decides where each tensor's bytes go: a parameter that is a plain copy
of its checkpoint tensor (same dtype and shape) receives them directly, piece by piece, from the host
buffer (no staging, no assembly); any other tensor is handed to `param.weight_loader(param, tensor)` as a
view of the chunk's bytes staged next to the parameters (assembled first if it straddles chunks), so dtype
conversions and transposes run where the parameter lives. No state dict is materialised: host memory used
is the ring (plus, on CPU, one tensor being assembled). After loading, every checkpoint tensor must have
been used and every parameter filled.

Contract for weight loaders: copy out of `tensor` (e.g. `param.data.copy_(...)`); never keep a view of
it, since its buffer is refilled with later chunks. A loader that aliases its input fails loudly.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from quickmoe.checkpoint.bindings import Binding, checkpoint_bindings
from quickmoe.checkpoint.chunk_plan import plan_chunks
from quickmoe.checkpoint.dtype_adoption import adopt_checkpoint_dtypes
from quickmoe.checkpoint.load_plan import LoadPlan, load_plan_file, plan_key
from quickmoe.checkpoint.loader_options import LoaderOptions
from quickmoe.checkpoint.narrow import rank_view
from quickmoe.checkpoint.reader import CheckpointReader, TensorSpec
from quickmoe.checkpoint.sink import ParameterSink
from quickmoe.checkpoint.staging import ChunkRing
from quickmoe.checkpoint.transfer import CudaTransfer, HostTransfer, address_copies_available
from quickmoe.errors import CheckpointError

__all__ = ["LoadStats", "expected_tensors", "load_weights", "DEFAULT_CHUNK_BYTES", "DEFAULT_NUM_BUFFERS",
           "DEFAULT_NUM_THREADS"]

logger = logging.getLogger(__name__)

_DEFAULTS = LoaderOptions()
DEFAULT_CHUNK_BYTES = _DEFAULTS.chunk_bytes
DEFAULT_NUM_THREADS = _DEFAULTS.threads
DEFAULT_NUM_BUFFERS = _DEFAULTS.buffers


@dataclass(frozen=True)
class LoadStats:
    """What loading did. `seconds` is the streaming time (reads through the last weight loader, GPU work
    included), `validate_seconds` the header check before it. Thread-summed fields (`read_seconds`,
    `copy_wait_seconds`, `setup_seconds`) can exceed `seconds`; `wait_seconds` is the consumer waiting for
    reads (read-bound when close to `seconds`), `deliver_seconds` its time issuing copies and weight
    loaders, `finish_seconds` the final wait for the device."""

    num_tensors: int
    num_bytes: int
    seconds: float
    validate_seconds: float = 0.0
    num_chunks: int = 0
    chunk_bytes: int = 0
    num_threads: int = 0
    num_buffers: int = 0
    peak_host_buffer_bytes: int = 0  # the ring's host buffers (+ the largest CPU assembly buffer)
    peak_device_buffer_bytes: int = 0  # device staging buffers (+ the largest device assembly buffer)
    read_seconds: float = 0.0
    copy_wait_seconds: float = 0.0
    setup_seconds: float = 0.0
    wait_seconds: float = 0.0
    deliver_seconds: float = 0.0
    finish_seconds: float = 0.0
    direct_copies: int = 0  # pieces copied straight into their parameters
    copy_calls: int = 0  # the driver calls that queued those copies (fewer where a chunk's copies are batched)
    plan_cached: bool = False  # streamed from a cached plan (`load_plan`): no bindings, validation or chunk plan

    @property
    def gb_per_s(self) -> float:
        return self.num_bytes / 1e9 / max(self.seconds, 1e-9)


def expected_tensors(model: nn.Module) -> dict[str, TensorSpec]:
    """The checkpoint tensors a model expects, from the formats its parameters declared."""
    return {name: b.spec for name, b in checkpoint_bindings(model).items()}


def load_weights(model: nn.Module, reader: CheckpointReader, *, progress: bool = False,
                 num_threads: int = DEFAULT_NUM_THREADS, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 num_buffers: int = DEFAULT_NUM_BUFFERS,
                 num_device_buffers: int = 2, host_buffers: Sequence[torch.Tensor] | None = None) -> LoadStats:
    """Validate, then stream every checkpoint tensor into its parameter.

    `num_threads` reader threads fill a ring of `num_buffers` host buffers of `chunk_bytes` each (page-locked
    when the parameters are on CUDA); `host_buffers`, if given, are used as that ring instead (one slot each,
    uint8, at least `chunk_bytes` long; e.g. the buffers the early start page-locked while torch imported).
    On CUDA, `num_device_buffers` device staging buffers of `chunk_bytes` receive the chunks. `progress`
    shows a byte progress bar (GB/s) when stderr is a terminal.
    """
    for option, value in (("num_threads", num_threads), ("chunk_bytes", chunk_bytes), ("num_buffers", num_buffers),
                          ("num_device_buffers", num_device_buffers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"load_weights option {option!r} = {value!r}: expected a positive integer")
    t_start = time.perf_counter()
    adopt_checkpoint_dtypes(model, reader)  # before the bindings: their direct landing depends on the dtypes
    device = _staging_device(p for _, p in model.named_parameters())
    key = plan_key(model, reader, chunk_bytes, device)
    cached = _cached_plan(key, model, reader, device)
    if cached is not None:  # a checked load of the same checkpoint, model and code: no per-tensor work
        validate_seconds = time.perf_counter() - t_start
        start = time.perf_counter()
        chunks, routes = cached.chunks_and_routes(model, reader)
        sink = ParameterSink(checkpoint_bindings(model, only=cached.delivered_names), device, ())
        sink.scratch_bytes = cached.scratch_bytes  # the largest delivered tensor assembled from several chunks
        staging_bytes, total = cached.staging_bytes, cached.payload_bytes()
    else:
        bindings = checkpoint_bindings(model)
        reader.validate({name: b.spec for name, b in bindings.items()})  # names, shapes, dtypes: all problems at once
        validate_seconds = time.perf_counter() - t_start
        start = time.perf_counter()
        view = rank_view(bindings, reader.entries, reader.entries_by_file)  # this rank's slices (all with one rank)
        bindings, entries = view.bindings, view.entries
        names = view.names
        chunks = plan_chunks(view.entries_by_file, chunk_bytes, names)
        sink = ParameterSink(bindings, device, chunks)
        sink.filled.update(view.skipped)
        empty = [name for name in names if entries[name].nbytes == 0]
        for name in empty:  # empty tensors have no bytes to read (nor a cached plan: it holds pieces only)
            entry = entries[name]
            sink.load(name, torch.empty(entry.shape, dtype=entry.dtype, device=device), None)
        routes, staging_bytes = sink.routes, sink.staging_bytes
        total = sum(entries[n].nbytes for n in names)
    buffer_bytes = max((c.nbytes for c in chunks), default=1)
    transfer = (CudaTransfer(device, staging_bytes, num_device_buffers) if device.type == "cuda"
                else HostTransfer())
    ring_stats: dict[str, float] = {}
    peak_host = 0
    deliver_seconds = finish_seconds = 0.0
    bar = _progress_bar(total, progress)
    try:
        if chunks:
            with ChunkRing(chunks, num_threads=num_threads, num_buffers=num_buffers, buffer_bytes=buffer_bytes,
                           pin_memory=device.type == "cuda", buffers=host_buffers) as ring:
                with transfer.streaming():
                    for chunk, host, slot in ring:
                        t0 = time.perf_counter()
                        route = routes[chunk.index]
                        staged = transfer.send(host, slot, ring, route)
                        sink.filled.update(route.completed)
                        if route.delivered:
                            assert staged is not None and route.span is not None
                            with transfer.delivering():
                                for piece in route.delivered:
                                    sink.deliver(piece, staged, route.span[0])
                        transfer.done(slot, ring)
                        deliver_seconds += time.perf_counter() - t0
                        if bar is not None:
                            bar.update(sum(p.nbytes for p in chunk.pieces) if chunk.pieces  # else a cached plan's
                                       else int(route.direct_ptrs[:, 2].sum()) + sum(p.nbytes for p in route.delivered))
                finish_seconds = transfer.finish()
                peak_host = ring.allocated_bytes
                ring_stats = dict(read_seconds=ring.read_seconds, copy_wait_seconds=ring.copy_wait_seconds,
                                  setup_seconds=ring.setup_seconds, wait_seconds=ring.wait_seconds,
                                  num_threads=ring.num_threads, num_buffers=ring.num_buffers)
    finally:
        transfer.close()
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - start
    if cached is None:
        sink.filled.update(view.filled_originals(sink.filled))
        _check_complete(reader, bindings, sink.filled)
        sink.filled.difference_update(view.skipped)
        sink.filled.difference_update(view.runs)  # counted by their runs
        num_tensors = len(sink.filled)
        if key is not None and not (view.skipped or view.runs or empty) and all(  # one rank's whole checkpoint
                b.narrow is None for b in bindings.values()):  # (a narrowed tensor's entry is not the file's)
            plan = LoadPlan.from_sink(model, reader, chunks, sink, num_tensors)
            if plan is not None:  # the next start with this key skips the per-tensor work
                plan.save(load_plan_file(key))
    else:
        num_tensors = cached.num_tensors
    assembly_bytes = sink.peak_assembly_bytes
    on_cpu = device.type != "cuda"
    stats = LoadStats(
        num_tensors=num_tensors, num_bytes=total, seconds=seconds, validate_seconds=validate_seconds,
        num_chunks=len(chunks), chunk_bytes=chunk_bytes,
        peak_host_buffer_bytes=peak_host + (assembly_bytes if on_cpu else 0),
        peak_device_buffer_bytes=transfer.allocated_bytes + (0 if on_cpu else assembly_bytes),
        deliver_seconds=deliver_seconds, finish_seconds=finish_seconds, direct_copies=transfer.direct_copies,
        copy_calls=transfer.copy_calls, plan_cached=cached is not None, **ring_stats)
    logger.info("loaded %d tensors, %.2f GB in %.2f s (%.2f GB/s; %d chunks of <= %d MiB, %d threads, "
                "%.0f MiB host buffers; validate %.3f s%s)", stats.num_tensors, stats.num_bytes / 1e9, stats.seconds,
                stats.gb_per_s, stats.num_chunks, chunk_bytes >> 20, stats.num_threads,
                stats.peak_host_buffer_bytes / 2**20, validate_seconds, "; cached plan" if stats.plan_cached else "")
    logger.debug("load phases: %s", stats)
    return stats


def _cached_plan(key: str | None, model: nn.Module, reader: CheckpointReader, device: torch.device) -> LoadPlan | None:
    """The cached plan of this load, where there is one that fits and the transfer copies by address."""
    if key is None:
        return None
    if device.type == "cuda" and not address_copies_available():
        return None
    plan = LoadPlan.load(load_plan_file(key))
    if plan is not None and not plan.applies_to(model, reader):
        logger.warning("the cached load plan %s does not fit this model and checkpoint; planning again",
                       load_plan_file(key))
        return None
    return plan


def _staging_device(params: Iterable[nn.Parameter]) -> torch.device:
    """Where chunks are staged: the parameters' CUDA device if they have one, else the CPU."""
    cuda = {p.device for p in params if p.device.type == "cuda"}
    if len(cuda) > 1:
        raise NotImplementedError(f"parameters on several CUDA devices ({sorted(map(str, cuda))}): the loader "
                                  "stages to one device per process")
    if not cuda:
        return torch.device("cpu")
    device = cuda.pop()
    return device if device.index is not None else torch.device("cuda", torch.cuda.current_device())


def _check_complete(reader: CheckpointReader, bindings: dict[str, Binding], filled: set[str]) -> None:
    unused = sorted(set(reader.entries) - filled)
    if unused:
        files = {str(reader.entries[n].file.name) for n in unused}
        raise CheckpointError(f"{len(unused)} checkpoint tensor(s) were not used by the model: "
                              f"{', '.join(unused[:10])} (in {', '.join(sorted(files))})")
    unfilled = sorted({b.param_name for name, b in bindings.items() if name not in filled})
    if unfilled:
        raise CheckpointError(f"{len(unfilled)} parameter(s) were never filled from {reader.model_dir}: "
                              f"{', '.join(unfilled[:10])}")


def _progress_bar(total: int, progress: bool):  # -> tqdm | None (tqdm is imported only when shown)
    if not progress or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1000, desc="loading weights",
                dynamic_ncols=True, file=sys.stderr)

"""The kernel precompile's dry steps over the fewest decoder layers that launch every kernel variant.

A dry step (executor/kernel_precompile.py) runs a whole forward so that every Triton launch of the step is recorded;
its Triton launches return at once, but its torch ops and Python run, 0.14 s a decode bucket for gpt-oss-20b's 24
layers (2.8 s for the 20 default buckets on the H200, 2026-12-03 second session). Layers of one kind launch the
same variants: the kind is what a launch's specialization can depend on, the layer's class, its parameters' and
buffers' names, shapes and dtypes, and its KV cache group (sliding or full attention), and the same of the layer
before it, whose output it takes (an MoE block's before its combine, [T, k, H], which the next layer's first norm
sums: models/decoder.py). `layer_prefix(layers, layer_group)` is the shortest prefix of the layers holding every
(kind, kind before) pair (gpt-oss: 3 of 24, Qwen3-30B-A3B: 2 of 48, a dense layer at index i: at least i + 2), and
`dry_layers` runs the decoder on it alone. A prefix, not a subset, so that the decoder's layer indices (KV caches,
groups) stay those of the full model. Not covered: the final norm takes the prefix's last layer's output, so a model
whose last layer's MLP differs from that layer's (a dense last layer after MoE layers: no shipped preset) would
compile that norm's variant at its first launch, as without the precompile.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from torch import nn

__all__ = ["dry_layers", "layer_kind", "layer_prefix"]


def layer_kind(layer: nn.Module, group: int) -> tuple:
    """What a decoder layer's kernel launches can depend on besides the step: its class, every parameter's and
    buffer's name, shape and dtype, and its KV cache group."""
    tensors = [*layer.named_parameters(), *layer.named_buffers()]
    return (type(layer).__qualname__, group, tuple((name, tuple(t.shape), t.dtype) for name, t in tensors))


def layer_prefix(layers: Sequence[nn.Module], layer_group: Sequence[int]) -> int:
    """The length of the shortest prefix of `layers` that holds every pair (a layer's kind, the kind of the layer
    before it; None for the first) that the layers hold (`layer_kind`)."""
    seen, length, before = set(), 0, None
    for idx, layer in enumerate(layers):
        kind = layer_kind(layer, layer_group[idx])
        if (kind, before) not in seen:
            seen.add((kind, before))
            length = idx + 1
        before = kind
    return length


@contextlib.contextmanager
def dry_layers(model: nn.Module, layer_group: Sequence[int]) -> Iterator[int]:
    """Within: `model.model` (the decoder) runs the layer prefix of `layer_prefix` alone; yields its length. The
    layers are back on exit. Only for dry steps: the outputs are not the model's."""
    decoder = model.model
    layers = decoder.layers
    length = layer_prefix(layers, layer_group)
    decoder.layers = nn.ModuleList(list(layers)[:length])
    try:
        yield length
    finally:
        decoder.layers = layers

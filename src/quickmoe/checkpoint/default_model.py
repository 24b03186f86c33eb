"""The embedded default model: a tiny random gpt-oss checkpoint, built once into the cache directory."""

from __future__ import annotations

import logging
from pathlib import Path

from quickmoe import __version__
from quickmoe.paths import cache_dir

logger = logging.getLogger(__name__)

DEFAULT_PRESET = "tiny"
DEFAULT_SEED = 0


def default_model_dir() -> Path:
    return cache_dir() / "models" / f"{DEFAULT_PRESET}-seed{DEFAULT_SEED}-v{__version__}"


def ensure_default_model() -> Path:
    """Return the default checkpoint directory, writing it first if it is not there yet."""
    out = default_model_dir()
    if (out / "model.safetensors.index.json").is_file():
        return out
    from quickmoe.checkpoint.synth import write_checkpoint

    logger.info("building the embedded default model (random weights, preset %r) into %s", DEFAULT_PRESET, out)
    try:
        write_checkpoint(out, preset=DEFAULT_PRESET, seed=DEFAULT_SEED, progress=False)
    except FileExistsError:
        if not (out / "model.safetensors.index.json").is_file():  # another process is still writing it
            raise
    return out

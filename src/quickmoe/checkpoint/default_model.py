"""The embedded default model, and the tiny random one.

The default (`ensure_default_model`) is a small gpt-oss trained on the Python standard library's source code, shipped
inside the package (checkpoint/embedded/: the exact Hugging Face layout with MXFP4 experts, its byte-level BPE
tokenizer.json, the held-out text it was measured on and a manifest; written by scripts/train_demo_model.py). The
tiny random gpt-oss with the real o200k_harmony vocabulary (`ensure_tiny_random_model`, preset `tiny`) is built once
into the cache directory: tests of harmony chat and tools use it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from quickmoe import __version__
from quickmoe.errors import ConfigError
from quickmoe.paths import cache_dir

logger = logging.getLogger(__name__)

TINY_RANDOM_PRESET = "tiny"
TINY_RANDOM_SEED = 0
EMBEDDED_DIR = Path(__file__).resolve().parent / "embedded"


def embedded_model_dir() -> Path:
    """The trained demo model inside the package."""
    return EMBEDDED_DIR


def ensure_default_model() -> Path:
    """The embedded default checkpoint directory (the trained demo model shipped with the package)."""
    out = embedded_model_dir()
    if not (out / "model.safetensors.index.json").is_file():
        raise ConfigError(f"the embedded model is missing from {out} (the package was installed without its data "
                          "files; reinstall quickmoe, or pass a model directory)")
    return out


def tiny_random_model_dir() -> Path:
    return cache_dir() / "models" / f"{TINY_RANDOM_PRESET}-seed{TINY_RANDOM_SEED}-v{__version__}"


def ensure_tiny_random_model() -> Path:
    """The tiny random gpt-oss checkpoint (o200k_harmony vocabulary), writing it first if it is not there yet."""
    out = tiny_random_model_dir()
    if (out / "model.safetensors.index.json").is_file():
        return out
    from quickmoe.checkpoint.synth import write_checkpoint

    logger.info("building the tiny random model (preset %r) into %s", TINY_RANDOM_PRESET, out)
    try:
        write_checkpoint(out, preset=TINY_RANDOM_PRESET, seed=TINY_RANDOM_SEED, progress=False)
    except FileExistsError:
        if not (out / "model.safetensors.index.json").is_file():  # another process is still writing it
            raise
    return out

"""Builds a model on its device, loads the checkpoint into it, and runs forward steps."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch

from quickmoe.checkpoint.loader import LoadStats, load_weights
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.config import EngineConfig, ModelConfig
from quickmoe.errors import ConfigError
from quickmoe.models.registry import build_model
from quickmoe.runtime.forward_batch import ForwardBatch
from quickmoe.runtime.kv_cache import KVCache

logger = logging.getLogger(__name__)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"engine option 'device' = {name!r}: CUDA is not available on this machine "
                          "(expected 'cpu' or 'auto')")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


class ModelRunner:
    """Owns the model: config -> build (parameters allocated on the device) -> load -> process."""

    def __init__(self, model_dir: str | Path, engine: EngineConfig) -> None:
        self.model_dir = Path(model_dir)
        self.device = resolve_device(engine.device)
        self.dtype = resolve_dtype(engine.dtype, self.device)
        self.timings: dict[str, float] = {}
        t0 = time.perf_counter()
        self.config = ModelConfig.from_dir(self.model_dir)
        reader = CheckpointReader(self.model_dir)  # headers only: fails fast on a bad checkpoint
        t1 = time.perf_counter()
        self.model = build_model(self.config, dtype=self.dtype, device=self.device)
        t2 = time.perf_counter()
        self.load_stats: LoadStats = load_weights(self.model, reader)
        t3 = time.perf_counter()
        self.model.process_weights_after_loading()
        self.model.eval()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        t4 = time.perf_counter()
        self.timings.update(config=t1 - t0, build=t2 - t1, load=t3 - t2, process=t4 - t3)
        logger.info("model %s on %s (%s): config %.2fs, build %.2fs, load %.2fs (%.2f GB/s), process %.2fs",
                    self.model_dir, self.device, str(self.dtype).removeprefix("torch."), t1 - t0, t2 - t1,
                    t3 - t2, self.load_stats.gb_per_s, t4 - t3)

    def new_kv_cache(self, num_slots: int, max_len: int) -> KVCache:
        return KVCache(self.config, num_slots, max_len, dtype=self.dtype, device=self.device)

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, *, all_logits: bool = False) -> torch.Tensor:
        """Float32 logits [B, V] of each sequence's last new token ([T, V] with all_logits)."""
        return self.model(batch, all_logits=all_logits)

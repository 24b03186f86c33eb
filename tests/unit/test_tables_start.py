"""The rotary table computed apart from the build (layers/rotary.py `fill`, executor/tables_start.py, opt-in with
QUICKMOE_TABLES_START=1): a model built with `defer_tables` has it pending until `fill_rotary_tables`, which gives the
bits `build_model` computes itself; on the GPU the table filled on `TablesStart`'s thread beside other work equals the
one built in place, bit for bit."""

from __future__ import annotations

import pytest
import torch

from quickmoe.errors import ConfigError

from quickmoe.config import ModelConfig
from quickmoe.executor.tables_start import TablesStart, tables_start_enabled
from quickmoe.layers.rotary import RotaryEmbedding, fill_rotary_tables, rope_inv_freq
from quickmoe.models.registry import build_model


@pytest.fixture(scope="module", params=["tiny", "qwen3-moe-tiny"])
def config(request, tmp_path_factory) -> ModelConfig:
    from quickmoe.checkpoint.synth import write_checkpoint

    model_dir = write_checkpoint(tmp_path_factory.mktemp("tables") / "m", preset=request.param, layers=2, experts=4,
                                 seed=7, progress=False)
    return ModelConfig.from_dir(model_dir)


def _tables(model) -> list[RotaryEmbedding]:
    tables = [m for m in model.modules() if isinstance(m, RotaryEmbedding)]
    assert tables
    return tables


def test_a_deferred_table_is_pending_until_filled_and_then_has_the_built_bits(config):
    want = _tables(build_model(config, dtype=torch.float32, device="cpu"))[0]
    assert not want.pending
    model = build_model(config, dtype=torch.float32, device="cpu", defer_tables=True)
    table = _tables(model)[0]
    assert table.pending
    fill_rotary_tables(model)
    assert not table.pending and torch.equal(table.cos_sin_cache, want.cos_sin_cache)
    # the values themselves: position p, pair i -> cos / sin of p * inv_freq[i] (checked against transformers in
    # test_layers.py), times the config's cos/sin scale
    inv = rope_inv_freq(config.rope, config.head_dim).double()
    angles = torch.arange(300, dtype=torch.float64)[:, None] * inv[None, :]  # [P, D/2]
    ref = torch.cat([angles.cos(), angles.sin()], -1) * config.rope.cos_sin_scale
    assert torch.allclose(table.cos_sin_cache[:300].double(), ref, atol=1e-4)
    table.cos_sin_cache[0, 0] = 5.0
    fill_rotary_tables(model)  # once filled, never again
    assert table.cos_sin_cache[0, 0].item() == 5.0


def test_a_model_built_on_meta_has_nothing_to_fill(config):
    model = build_model(config, dtype=torch.bfloat16, device="meta", defer_tables=True)
    assert not _tables(model)[0].pending
    fill_rotary_tables(model)


@pytest.mark.gpu
def test_the_thread_fills_the_tables_with_the_bits_of_the_build(config):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    device = torch.device("cuda")
    want = _tables(build_model(config, dtype=torch.bfloat16, device=device))[0].cos_sin_cache
    model = build_model(config, dtype=torch.bfloat16, device=device, defer_tables=True)
    start = TablesStart(device, model).start()
    busy = torch.randn(4096, 4096, device=device)  # the main thread works on its own meanwhile
    for _ in range(4):
        busy = busy @ busy.T / 4096
    seconds = start.join()
    assert start.error is None and seconds is not None and seconds > 0
    table = _tables(model)[0]
    assert not table.pending and torch.equal(table.cos_sin_cache, want)


@pytest.mark.parametrize("value,enabled", [(None, True), ("0", False), ("1", True)])
def test_the_switch_is_on_by_default(monkeypatch, value, enabled):
    if value is None:
        monkeypatch.delenv("QUICKMOE_TABLES_START", raising=False)
    else:
        monkeypatch.setenv("QUICKMOE_TABLES_START", value)
    assert tables_start_enabled() is enabled


def test_a_bad_switch_names_the_variable_and_the_choices(monkeypatch):
    monkeypatch.setenv("QUICKMOE_TABLES_START", "yes")
    with pytest.raises(ConfigError, match=r"QUICKMOE_TABLES_START='yes': expected '1' .* or '0'"):
        tables_start_enabled()



def test_a_bad_switch_stops_a_cpu_start_with_the_message(tmp_path):
    """The value is checked on every device (on the CPU the tables are computed in the build either way)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "QUICKMOE_TABLES_START": "yes", "QUICKMOE_CACHE_DIR": str(tmp_path)}
    bad = subprocess.run([sys.executable, "-m", "quickmoe", "generate", "--prompt", "x", "--max-tokens", "1",
                          "--device", "cpu", "-q"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "QUICKMOE_TABLES_START='yes'" in bad.stderr and "Traceback" not in bad.stderr

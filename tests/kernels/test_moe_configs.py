"""MoE kernel configs: validation, the nearest tuned token count from a data file, the fallback without
one, and a clear error naming a broken file."""

from __future__ import annotations

import json

import pytest

from quickmoe.errors import ConfigError
from quickmoe.kernels import moe_configs
from quickmoe.kernels.moe_configs import MoEKernelConfig, config_file_name, moe_kernel_config


def test_config_is_validated():
    with pytest.raises(ConfigError, match="'block_m' = 24: expected a power of two"):
        MoEKernelConfig(block_m=24)
    with pytest.raises(ConfigError, match="block_k a multiple of 32"):
        MoEKernelConfig(block_k=16)
    with pytest.raises(ConfigError, match="'num_stages' = 0"):
        MoEKernelConfig(num_stages=0)


def test_nearest_tuned_token_count_and_fallback(tmp_path):
    name = config_file_name(32, 5760, 2880, "mxfp4", "NVIDIA H100 80GB HBM3")
    assert name == "E32_N5760_K2880_mxfp4_NVIDIA_H100_80GB_HBM3.json"
    small = dict(block_m=16, block_n=32, block_k=256, num_warps=4, num_stages=4)
    large = dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3)
    (tmp_path / name).write_text(json.dumps({"1": small, "4096": large}))
    get = lambda t: moe_kernel_config(32, 5760, 2880, "mxfp4", "NVIDIA H100 80GB HBM3", t, config_dir=tmp_path)
    assert get(1) == MoEKernelConfig(**small) and get(100) == MoEKernelConfig(**small)
    assert get(3000) == MoEKernelConfig(**large) and get(8192) == MoEKernelConfig(**large)
    borrowed = moe_kernel_config(128, 5760, 2880, "mxfp4", "NVIDIA H100 80GB HBM3", 4096, config_dir=tmp_path)
    assert borrowed == MoEKernelConfig(**large)  # no file for 128 experts: the 32 experts' file
    other = moe_kernel_config(128, 2880, 2880, "mxfp4", "NVIDIA H100 80GB HBM3", 4096, config_dir=tmp_path)
    assert other == moe_configs._fallback(4096)  # no file for this N at any expert count: the fallback


def test_a_broken_file_is_named(tmp_path):
    name = config_file_name(8, 128, 64, "dense", "cpu")
    (tmp_path / name).write_text(json.dumps({"1": {"block_m": 16, "tile": 3}}))
    with pytest.raises(ConfigError, match=f"{name}: not a MoE kernel config file"):
        moe_kernel_config(8, 128, 64, "dense", "cpu", 1, config_dir=tmp_path)

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
    with pytest.raises(ConfigError, match="'weight_tma' = 'yes': expected true or false"):
        MoEKernelConfig(weight_tma="yes")
    for cap in (8, 256, -1, True, 168.0):
        with pytest.raises(ConfigError, match=f"'maxnreg' = {cap!r}: expected 0 \\(no cap\\) or 24 .. 255"):
            MoEKernelConfig(maxnreg=cap)
    assert MoEKernelConfig(maxnreg=168).maxnreg == 168 and MoEKernelConfig().maxnreg == 0


def test_nearest_tuned_token_count_and_fallback(tmp_path):
    name = config_file_name(32, 5760, 2880, "mxfp4", "NVIDIA H100 80GB HBM3", "gate_up")
    assert name == "E32_N5760_K2880_mxfp4_gate_up_NVIDIA_H100_80GB_HBM3.json"
    small = dict(block_m=16, block_n=32, block_k=256, num_warps=4, num_stages=4)
    large = dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3)
    (tmp_path / name).write_text(json.dumps({"1": small, "4096": large}))

    def get(tokens, experts=32, n=5760, proj="gate_up"):
        return moe_kernel_config(experts, n, 2880, "mxfp4", "NVIDIA H100 80GB HBM3", tokens, config_dir=tmp_path,
                                 proj=proj)

    assert get(1) == MoEKernelConfig(**small) and get(100) == MoEKernelConfig(**small)
    assert get(3000) == MoEKernelConfig(**large) and get(8192) == MoEKernelConfig(**large)
    assert get(4096, experts=128) == MoEKernelConfig(**large)  # no file for 128 experts: the 32 experts' file
    assert get(4096, experts=128, n=2880) == moe_configs._fallback(4096)  # no file for this N at any expert count
    assert get(4096, proj="down") == moe_configs._fallback(4096)  # the shape's gate_up file is not the down's


def test_the_two_projections_of_one_shape_read_their_own_files(tmp_path, caplog):
    """gpt-oss's down projection on one GPU and a rank's gate_up at TP = 2 are both (E, N = 2,880, K = 2,880): each
    reads the file of its projection (by shape alone the rank read the down entries, 2.6x slower for it at one T);
    a projection that is neither is refused, naming the choices."""
    down = dict(block_m=32, block_n=64, block_k=256, num_warps=2, num_stages=3, swap_ab=True, register_operand=True)
    gate_up = dict(block_m=16, block_n=128, block_k=256, num_warps=4, num_stages=3)
    for proj, entry in (("down", down), ("gate_up", gate_up)):
        (tmp_path / config_file_name(128, 2880, 2880, "mxfp4", "NVIDIA H200", proj)).write_text(
            json.dumps({"256": entry}))
    for proj, entry in (("down", down), ("gate_up", gate_up)):
        assert moe_kernel_config(128, 2880, 2880, "mxfp4", "NVIDIA H200", 256, config_dir=tmp_path,
                                 proj=proj) == MoEKernelConfig(**entry)
    with pytest.raises(ConfigError, match=r"projection 'up'; expected one of \['gate_up', 'down'\]"):
        moe_kernel_config(128, 2880, 2880, "mxfp4", "NVIDIA H200", 256, config_dir=tmp_path, proj="up")


def test_every_shipped_file_names_a_projection_its_shape_fits():
    """A gate_up file's N is 2I and its K the hidden size; a down file's N is the hidden size: each shipped down
    file (E, H, I) has its model's gate_up file (E, 2I, H) beside it, for one device and format."""
    stems = {path.stem for path in moe_configs.CONFIG_DIR.glob("E*_N*_K*_*.json")}
    downs = [stem for stem in stems if "_down_" in stem]
    assert downs and all("_gate_up_" in stem or "_down_" in stem for stem in stems), stems
    for stem in downs:
        experts, n, k, rest = stem.split("_", 3)
        weights, device = rest.split("_down_")
        assert f"{experts}_N{2 * int(k[1:])}_K{n[1:]}_{weights}_gate_up_{device}" in stems, stem


def test_a_broken_file_is_named(tmp_path):
    name = config_file_name(8, 128, 64, "dense", "cpu", "down")
    (tmp_path / name).write_text(json.dumps({"1": {"block_m": 16, "tile": 3}}))
    with pytest.raises(ConfigError, match=f"{name}: not a MoE kernel config file"):
        moe_kernel_config(8, 128, 64, "dense", "cpu", 1, config_dir=tmp_path, proj="down")


def test_a_device_without_files_borrows_a_same_architecture_devices(tmp_path, caplog, monkeypatch):
    """An H200 (no files of its own) takes the H100's tuned entries, said once in the log; a device of another
    architecture, or one whose architecture is unknown, takes the fallback; a device's own file wins."""
    h100 = dict(block_m=16, block_n=32, block_k=256, num_warps=2, num_stages=3, swap_ab=True)
    (tmp_path / config_file_name(32, 5760, 2880, "mxfp4", "NVIDIA H100 80GB HBM3", "gate_up")).write_text(
        json.dumps({"1": h100}))
    monkeypatch.setitem(moe_configs.TUNED_DEVICE_ARCH, "Tuned_GPU", "sm_89")

    def get(device_name, arch, experts=32, tokens=1):
        return moe_kernel_config(experts, 5760, 2880, "mxfp4", device_name, tokens, config_dir=tmp_path, arch=arch,
                                 proj="gate_up")

    with caplog.at_level("INFO", logger="quickmoe.kernels.moe_configs"):
        assert get("NVIDIA H200", "sm_90") == MoEKernelConfig(**h100)
        assert get("NVIDIA H200", "sm_90", tokens=7) == MoEKernelConfig(**h100)
        assert get("NVIDIA H200", "sm_90", experts=128) == MoEKernelConfig(**h100)  # nearest expert count too
    borrowed = [r.getMessage() for r in caplog.records if "none tuned on NVIDIA H200" in r.getMessage()]
    assert len(borrowed) == 2 and "using E32_N5760_K2880_mxfp4_gate_up_NVIDIA_H100_80GB_HBM3.json (same sm_90)" in (
        borrowed[0])
    assert get("NVIDIA A100-SXM4-80GB", "sm_80") == moe_configs._fallback(1)
    assert get("NVIDIA H200", None) == moe_configs._fallback(1)
    own = dict(h100, num_warps=4)
    both = tmp_path / "both"
    both.mkdir()
    for device, entry in (("NVIDIA H100 80GB HBM3", h100), ("NVIDIA H200", own)):
        (both / config_file_name(32, 5760, 2880, "mxfp4", device, "gate_up")).write_text(json.dumps({"1": entry}))
    assert moe_kernel_config(32, 5760, 2880, "mxfp4", "NVIDIA H200", 1, config_dir=both, arch="sm_90",
                             proj="gate_up") == MoEKernelConfig(**own)
    # the same expert count on a sibling comes before another expert count on this device
    h100_128 = dict(h100, block_k=128)
    (both / config_file_name(128, 5760, 2880, "mxfp4", "NVIDIA H100 80GB HBM3", "gate_up")).write_text(
        json.dumps({"1": h100_128}))
    assert moe_kernel_config(128, 5760, 2880, "mxfp4", "NVIDIA H200", 1, config_dir=both, arch="sm_90",
                             proj="gate_up") == MoEKernelConfig(**h100_128)
    assert moe_kernel_config(64, 5760, 2880, "mxfp4", "NVIDIA H200", 1, config_dir=both, arch="sm_90",
                             proj="gate_up") == MoEKernelConfig(**own)  # no file for 64 experts: this device's 32


def test_every_shipped_files_device_has_its_architecture():
    """A device tuned later must say its architecture, or its siblings would not find its files."""
    devices = {path.stem.split("_gate_up_" if "_gate_up_" in path.stem else "_down_")[1]
               for path in moe_configs.CONFIG_DIR.glob("E*_N*_K*_*.json")}
    assert devices and devices <= set(moe_configs.TUNED_DEVICE_ARCH), devices - set(moe_configs.TUNED_DEVICE_ARCH)


def test_shipped_eight_row_tiles_pair_with_a_transposed_gemm_2():
    """GEMM 2 runs on GEMM 1's alignment, so its tiles have GEMM 1's rows: where a shipped GEMM 1 entry takes 8-row
    tiles (the transposed orientation's), the GEMM 2 entry of the same model, format, device and T must be
    transposed too (in the plain orientation 8 rows would be padded to the mma's 16)."""
    files = {path.stem: json.loads(path.read_text()) for path in moe_configs.CONFIG_DIR.glob("E*_N*_K*_*.json")}
    pairs = 0
    for stem, table in files.items():
        if "_gate_up_" not in stem:
            continue
        experts, n, k, rest = stem.split("_", 3)
        gemm2 = files.get(f"{experts}_N{k[1:]}_K{int(n[1:]) // 2}_{rest.replace('_gate_up_', '_down_')}")
        if gemm2 is None:  # GEMM 1 is [2I, H], GEMM 2 [H, I]; none: a rank's gate_up at TP = 2
            continue
        for tokens, entry in table.items():
            if entry["block_m"] < 16:
                pairs += 1
                assert MoEKernelConfig(**entry).swap_ab, (stem, tokens)
                assert gemm2[tokens]["swap_ab"], (stem, tokens, gemm2[tokens])
    assert pairs, "no shipped 8-row tile"


def test_no_shipped_nvfp4_file_holds_an_unreliable_tile():
    """NVFP4's transposed 4-warp tiles of 64+ rows gave NaN / inf now and then on the H200 (`nvfp4_tile_unreliable`);
    the shipped files must not take them at any T (the Qwen3-30B-A3B files did at T = 8,192 until the 2026-11-29
    tenth session)."""
    files = sorted(moe_configs.CONFIG_DIR.glob("E*_N*_K*_nvfp4_*.json"))
    assert files
    for path in files:
        for tokens, entry in json.loads(path.read_text()).items():
            assert not moe_configs.nvfp4_tile_unreliable(MoEKernelConfig(**entry)), (path.name, tokens, entry)

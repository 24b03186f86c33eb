"""Block sizes, warps and stages of the MoE GEMMs, per shape and device, shipped as data files.

`scripts/tune_moe.py` times candidate configs on a GPU and writes one JSON file per (experts, N, K, weight
format, projection, device) into `kernels/configs/`, named like
`E32_N5760_K2880_mxfp4_gate_up_NVIDIA_H100_80GB_HBM3.json`, mapping token counts to configs:
{"1": {"block_m": 16, "block_n": 64, "block_k": 128, "num_warps": 4, "num_stages": 3}, "16": {...}, ...}.
`moe_kernel_config(...)` picks the entry of the nearest tuned token count (no autotuning at start-up). A
shape without its own file borrows the file of the nearest expert count with the same N, K, format and
device (the tiles depend on rows per expert far less than on N and K). A device with no file for the shape
borrows the files of a device of the same architecture (`TUNED_DEVICE_ARCH`: an H200 or an H100 PCIe takes the
H100 SXM's files; same SMs and instructions, the tiles' register and shared-memory budgets are the same), and
says so once in the log. With none, the fallback below, which is correct for every shape and sane for gpt-oss.
N is the GEMM's output width as stored (gate_up: 2I; down: H), K its reduction (H; I). The projection
(`PROJECTIONS`: GEMM 1 `gate_up`, GEMM 2 `down`) is part of the name because (E, N, K) alone does not tell the GEMMs
apart: a rank's gate_up of gpt-oss at TP = 2 (N = 2 x 1,440, K = 2,880) has the shape of the one-GPU down projection,
whose tuned tiles it used to read (a 32-row register entry tuned for one there cost the other 2.6x:
docs/benchmarks.md, 2026-11-30 seventh session).
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from quickmoe.errors import ConfigError

__all__ = ["CONFIG_DIR", "PROJECTIONS", "REGISTER_OPERAND_ROWS", "TUNED_DEVICE_ARCH", "MoEKernelConfig",
           "config_file_name", "moe_kernel_config", "nearest_key_starts", "nvfp4_tile_unreliable",
           "tuned_token_counts"]

logger = logging.getLogger(__name__)

CONFIG_DIR = Path(__file__).with_name("configs")

# The architecture ("sm_XY", `device_arch`) of each device that has tuned files here, by its name as the files
# spell it: a device without files of its own borrows those of a device with the same architecture.
TUNED_DEVICE_ARCH = {"NVIDIA_H100_80GB_HBM3": "sm_90", "NVIDIA_H200": "sm_90"}


# the tile rows (wgmma's N side: the assignments) the register-operand GEMMs of moe_gemm_register take
REGISTER_OPERAND_ROWS = (8, 16, 32, 64)
# the K steps of 64 a pipeline stage of those GEMMs can take
REGISTER_STEPS_PER_STAGE = (1, 2)


@dataclass(frozen=True)
class MoEKernelConfig:
    """Launch parameters of one grouped GEMM. block_m: assignment rows per tile (also the alignment of
    `moe_align`; 8 only with swap_ab, where the assignments are the mma's 8-wide side: half the tensor-core work
    and operand moves of 16 rows at decode sizes, the same bits); block_n: output columns (GEMM 1: activation
    columns, at most the layout's gate/up group, which it divides); block_k: reduction step, a multiple of 32 (one
    MX block); swap_ab: the GEMM's orientation; group_m: M tiles that
    sweep all N tiles together (L2 reuse of activations and weights); gate_up_one_dot: GEMM 1 multiplies its
    columns' gate and up rows in one dot of 2 x block_n weight rows (wider tensor-core tiles; the epilogue splits
    the accumulator) instead of two dots of block_n (GEMM 2 ignores it); weight_tma: the weight tiles (any format)
    loaded by the Hopper tensor-memory accelerator through a tensor descriptor instead of per-thread pointers
    (`moe_gemm_operands.weight_descriptor`; with gate_up_one_dot one block of whole gate/up groups, which GEMM 1
    checks);
    split_k: programs per output tile, each over an equal run of the K steps (the largest count up to split_k that
    divides them), whose float32 parts the tile's last program adds in order before the epilogue
    (`moe_gemm._split_parts`): more programs for decode-sized launches, another float32 sum than one program's;
    maxnreg: a cap on the registers per thread (ptxas `.maxnreg`; 0: the compiler's choice), so that more programs
    fit an SM where registers, not shared memory, bound them (the same arithmetic, at most spilled values moved
    through local memory: the same bits); register_operand: the GEMM of MXFP4 experts on Hopper by a Gluon kernel
    of `moe_gemm_register` (the decoded weights as wgmma's register operand, block_m of `REGISTER_OPERAND_ROWS`
    assignment rows a tile, 128 weight rows a program, num_stages pipeline stages; its other fields but
    steps_per_stage and maxnreg are unused there), where its operands allow (bf16 activations; GEMM 1: gpt-oss's SwiGLU; GEMM 2:
    GEMM 1's alignment of such rows): else the GEMM runs the Triton tile this config describes (so it must be a valid
    one: 8 rows with swap_ab); steps_per_stage: the register-operand kernels' K steps of 64 a pipeline stage (1 or
    2: two halve a step's mbarrier waits, CTA barriers and copy issues, and take a row's 64 bytes of the stage in
    one copy; `moe_register_k_loop.k_loop`)."""

    block_m: int = 16
    block_n: int = 64
    block_k: int = 64
    num_warps: int = 4
    num_stages: int = 2
    swap_ab: bool = False  # compute weights x activations^T (see moe_gemm); a tuned choice
    group_m: int = 1  # M tiles per group of the launch order (see moe_program_tile.tile_of)
    gate_up_one_dot: bool = False  # GEMM 1: gate and up rows in one dot (see moe_gemm1_kernel._gemm1_tile)
    weight_tma: bool = False  # weight tiles by TMA (see moe_gemm_operands.weight_descriptor)
    split_k: int = 1  # programs per output tile over parts of K (see moe_gemm._split_parts)
    maxnreg: int = 0  # registers per thread at most (0: no cap)
    register_operand: bool = False  # the GEMM by moe_gemm_register's Gluon kernels (see above)
    steps_per_stage: int = 1  # register_operand only: K steps of 64 a pipeline stage (1 or 2)

    def __post_init__(self) -> None:
        for name in ("swap_ab", "gate_up_one_dot", "weight_tma", "register_operand"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"MoE kernel config {name!r} = {getattr(self, name)!r}: expected true or false")
        for f in fields(self):
            if f.name in ("swap_ab", "gate_up_one_dot", "weight_tma", "maxnreg", "register_operand"):
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"MoE kernel config {f.name!r} = {value!r}: expected a positive integer")
        for name in ("block_m", "block_n", "block_k", "num_warps"):  # group_m: any positive integer
            value = getattr(self, name)
            if value & (value - 1):
                raise ConfigError(f"MoE kernel config {name!r} = {value}: expected a power of two")
        if isinstance(self.maxnreg, bool) or not isinstance(self.maxnreg, int) or not (
                self.maxnreg == 0 or 24 <= self.maxnreg <= 255):
            raise ConfigError(f"MoE kernel config 'maxnreg' = {self.maxnreg!r}: expected 0 (no cap) or 24 .. 255 "
                              "registers per thread")
        if self.steps_per_stage not in REGISTER_STEPS_PER_STAGE:
            raise ConfigError(f"MoE kernel config 'steps_per_stage' = {self.steps_per_stage!r}: expected one of "
                              f"{list(REGISTER_STEPS_PER_STAGE)} (the register-operand kernels' K steps a stage)")
        if self.register_operand and self.block_m not in REGISTER_OPERAND_ROWS:
            raise ConfigError(f"MoE kernel config 'block_m' = {self.block_m} with register_operand: expected one of "
                              f"{list(REGISTER_OPERAND_ROWS)} (the register-operand GEMMs' tiles)")
        # The tokens are the mma's 8-wide side in the transposed orientation, so its tiles may take 8 of them
        min_block_m = 8 if self.swap_ab else 16
        if self.block_m < min_block_m or self.block_n < 16 or self.block_k % 32:
            raise ConfigError(f"MoE kernel config {self}: block_m must be >= 16 (>= 8 with swap_ab), block_n >= 16 "
                              "(tensor-core tiles) and block_k a multiple of 32 (one MX block)")


def nvfp4_tile_unreliable(config: MoEKernelConfig) -> bool:
    """NVFP4 tiles of 64 rows or more, transposed, on 4 warps: on the H200 (Triton 3.6) they gave NaN or inf in a few
    outputs in some runs and the right result in others, in both GEMMs, with the block scales loaded in the K step
    or one step ahead (docs/benchmarks.md, 2026-11-29 tenth session). A tuner's check of one run cannot rule them
    out, so `scripts/tune_moe.py` never tries them and no shipped NVFP4 file holds one. The same tiles on 8 warps,
    or in the plain orientation, gave neither and matched the reference in every run there. MXFP4's tiles of the
    same shape (gpt-oss-20b's key 1,024) compile to the same register-operand wgmma loop and have not been checked
    with repeated runs yet."""
    return config.swap_ab and config.num_warps == 4 and config.block_m >= 64


def _fallback(tokens: int) -> MoEKernelConfig:
    """Untuned shapes: the H100's tuned choices for gpt-oss, by token count (deep K steps for decode-sized
    batches; for prefill larger tiles in L2-friendly groups, GEMM 1's gate and up rows in one dot: at these two
    tiles it was faster in every shape and format measured, docs/benchmarks.md, 2026-11-27 second session)."""
    if tokens <= 64:
        return MoEKernelConfig(block_m=16, block_n=64, block_k=256, num_warps=4, num_stages=3)
    if tokens <= 1024:
        return MoEKernelConfig(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=3, group_m=8,
                               gate_up_one_dot=True)
    return MoEKernelConfig(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3, group_m=8,
                           gate_up_one_dot=True)


def _file_device(device_name: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in device_name)


PROJECTIONS = ("gate_up", "down")  # GEMM 1, GEMM 2


def config_file_name(num_experts: int, n: int, k: int, weights: str, device_name: str, proj: str) -> str:
    if proj not in PROJECTIONS:
        raise ConfigError(f"MoE kernel config file: projection {proj!r}; expected one of {list(PROJECTIONS)}")
    return f"E{num_experts}_N{n}_K{k}_{weights}_{proj}_{_file_device(device_name)}.json"


def _nearest_expert_file(num_experts: int, n: int, k: int, weights: str, device_name: str, proj: str,
                         config_dir: Path) -> Path | None:
    suffix = config_file_name(num_experts, n, k, weights, device_name, proj).split("_", 1)[1]  # all but E
    candidates = []
    for path in config_dir.glob(f"E*_{suffix}"):
        experts = path.name.split("_", 1)[0][1:]
        if experts.isdigit():
            candidates.append((abs(int(experts) - num_experts), int(experts), path))
    return min(candidates)[2] if candidates else None


@functools.lru_cache(maxsize=64)
def _load(path: Path) -> dict[int, MoEKernelConfig] | None:
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
        return {int(t): MoEKernelConfig(**cfg) for t, cfg in raw.items()}
    except (ValueError, TypeError) as exc:  # bad JSON, keys that are not token counts, unknown fields
        raise ConfigError(f"{path}: not a MoE kernel config file ({exc}); expected "
                          f"{{\"<tokens>\": {asdict(MoEKernelConfig())}, ...}}") from None


@functools.lru_cache(maxsize=256)  # once per shape: the log line below is said once
def _config_file(num_experts: int, n: int, k: int, weights: str, device_name: str, arch: str | None,
                 config_dir: Path, proj: str) -> Path | None:
    """The shape's file: this device's, else a same-architecture device's with the same expert count (the tiles
    follow the rows per expert: gpt-oss-120b's 128 experts at T = 1,024 ran 48% slower on the 20b's entries),
    else the nearest expert count's, this device's first."""
    own = _file_device(device_name)
    devices = [own] + [d for d, d_arch in sorted(TUNED_DEVICE_ARCH.items()) if arch is not None and d_arch == arch
                       and d != own]
    exact = (config_dir / config_file_name(num_experts, n, k, weights, d, proj) for d in devices)
    path = next((p for p in exact if p.is_file()), None)
    for device in devices:
        if path is not None:
            break
        path = _nearest_expert_file(num_experts, n, k, weights, device, proj, config_dir)
    if path is not None and not path.name.endswith(f"_{own}.json"):
        logger.info("MoE kernel configs for E%d N%d K%d %s %s: none tuned on %s; using %s (same %s)", num_experts,
                    n, k, weights, proj, device_name, path.name, arch)
    return path


@functools.lru_cache(maxsize=4096)  # called per MoE layer and step: no file-system work after the first
def moe_kernel_config(num_experts: int, n: int, k: int, weights: str, device_name: str, tokens: int,
                      config_dir: Path = CONFIG_DIR, arch: str | None = None, *, proj: str) -> MoEKernelConfig:
    """The tuned config of the nearest token count for this projection (`proj`: "gate_up" for GEMM 1, "down" for
    GEMM 2), shape and device (`arch`, e.g. "sm_90": a device without files takes a same-architecture device's,
    `TUNED_DEVICE_ARCH`), else the fallback."""
    path = _config_file(num_experts, n, k, weights, device_name, arch, config_dir, proj)
    table = _load(path) if path is not None else None
    if not table:
        return _fallback(tokens)
    nearest = min(table, key=lambda t: (abs(t - tokens), t))
    return table[nearest]


def tuned_token_counts(num_experts: int, n: int, k: int, weights: str, device_name: str,
                       config_dir: Path = CONFIG_DIR, arch: str | None = None, *, proj: str) -> tuple[int, ...]:
    """The token counts (keys) of the table `moe_kernel_config` reads for this projection, shape and device, sorted;
    () where it takes the fallback."""
    path = _config_file(num_experts, n, k, weights, device_name, arch, config_dir, proj)
    table = _load(path) if path is not None else None
    return tuple(sorted(table)) if table else ()


def nearest_key_starts(keys) -> list[int]:
    """For each key of a table, sorted, the smallest token count >= 1 whose nearest key it is under
    `moe_kernel_config`'s rule (ties go to the smaller key): 1 for the first, (a + b) // 2 + 1 for key b after a.
    Every T from there up to the next key's start reads that key's entry."""
    keys = sorted(set(keys))
    return [1] + [(a + b) // 2 + 1 for a, b in zip(keys, keys[1:])] if keys else []

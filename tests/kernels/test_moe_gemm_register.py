"""The register-operand GEMM 1 (`kernels/moe_gemm_register.py`): the K order that hands each lane its words, the
row gather (Triton; the interpreter on CPU) against its torch reference and a naive loop, the config field and the
fall-back to the Triton tile where the kernel cannot run; on the GPU the Gluon kernel against the float32 reference
on gpt-oss-20b-shaped experts (tiles of 8, 16, 32 and 64 rows, half-filled tiles, experts with no and with several
tiles), and `moe_gemm1_swiglu` handing a `register_operand` config to it."""

from __future__ import annotations

import logging

import pytest
import torch

from quickmoe.errors import ConfigError
from quickmoe.kernels.moe_align import moe_align_ref
from quickmoe.kernels.moe_configs import MoEKernelConfig
from quickmoe.kernels.moe_gather_permuted import (
    PHYSICAL_COLUMN,
    STEP,
    gather_permuted_rows,
    gather_permuted_rows_ref,
)
from quickmoe.kernels.moe_gemm_register import moe_gemm1_swiglu_register_ref, register_operand_problem
from quickmoe.kernels.routing import route_ref

pytest.importorskip("triton")
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_the_logical_k_order_gives_each_lane_its_two_words_in_decode_order():
    """mma's A fragment: lane (g, q) holds, in k block kb, columns 2q + 8s + h (s, h = 0, 1) of rows g and g + 8. The
    kernel decodes word wi (of 2q, 2q + 1) of a row into four pairs p = 0..3 (columns 8 (2q + wi) + 2p + h) and takes
    pair p as (kb, s) = (2 wi + p // 2, p % 2): the logical column 16 kb + 8 s + 2 q + h must be that physical one."""
    assert sorted(PHYSICAL_COLUMN) == list(range(STEP))
    for q in range(4):
        for wi in range(2):
            for p in range(4):
                for h in range(2):
                    kb, s = 2 * wi + p // 2, p % 2
                    assert PHYSICAL_COLUMN[16 * kb + 8 * s + 2 * q + h] == 8 * (2 * q + wi) + 2 * p + h


def _routing(num_tokens, num_experts, top_k, g, crowd=0):
    """Random top-k routing; `crowd` > 0 sends every token to expert 0 too (more than one tile of rows) and keeps
    the last expert empty."""
    logits = torch.randn(num_tokens, num_experts, generator=g)
    logits[:, -1] -= 100.0
    if crowd:
        logits[:, 0] += 100.0
    return route_ref(logits, top_k)


@pytest.mark.parametrize("block_m,hidden", [(8, 192), (16, 192), (32, 192), (64, 192), (16, 160), (32, 96)])
def test_the_gather_kernel_matches_its_reference_and_a_naive_loop(block_m, hidden):
    """Also where K is not whole steps of 64 (a rank's down projection at tensor parallel 2 of gpt-oss): the buffer
    is whole steps wide, zero where a logical column's physical one lies past K."""
    g = torch.Generator().manual_seed(block_m + hidden)
    num_tokens, num_experts, top_k = 37, 6, 2
    x = torch.randn(num_tokens, hidden, generator=g).to(torch.bfloat16).to(DEVICE)
    _, ids = _routing(num_tokens, num_experts, top_k, g, crowd=1)
    align = moe_align_ref(ids.to(DEVICE), num_experts, block_m)
    got, want = gather_permuted_rows(x, align, top_k), gather_permuted_rows_ref(x, align, top_k)
    width = -(-hidden // STEP) * STEP
    assert got.shape == want.shape == (align.sorted_ids.numel(), width)
    used = int(align.num_padded.item())
    valid = align.sorted_ids[:used] < align.num_assignments
    assert int(valid.sum()) == num_tokens * top_k
    assert torch.equal(got[:used][valid], want[:used][valid])
    for row in torch.nonzero(valid).flatten()[::11].tolist():  # naive: row r, column 64 j + c
        token = int(align.sorted_ids[row]) // top_k
        for column in range(0, width, 3):
            j, c = divmod(column, STEP)
            physical = STEP * j + PHYSICAL_COLUMN[c]
            assert want[row, column] == (x[token, physical] if physical < hidden else 0)
    assert not want[:used][~valid].any()


def test_the_config_field():
    for block_m in (16, 32, 64):
        assert MoEKernelConfig(block_m=block_m, register_operand=True).register_operand
    assert MoEKernelConfig(block_m=8, swap_ab=True, register_operand=True).register_operand
    with pytest.raises(ConfigError, match="block_m must be >= 16 \\(>= 8 with swap_ab\\)"):
        MoEKernelConfig(block_m=8, register_operand=True)  # its Triton tile (the fall-back) must be valid too
    for block_m in (128, 256):
        with pytest.raises(ConfigError, match=f"'block_m' = {block_m} with register_operand: expected one of "
                                              r"\[8, 16, 32, 64\]"):
            MoEKernelConfig(block_m=block_m, register_operand=True)
    with pytest.raises(ConfigError, match="'register_operand' = 1: expected true or false"):
        MoEKernelConfig(block_m=64, register_operand=1)
    assert MoEKernelConfig(block_m=64, register_operand=True, steps_per_stage=2).steps_per_stage == 2
    for steps in (3, 4):
        with pytest.raises(ConfigError, match=rf"'steps_per_stage' = {steps}: expected one of \[1, 2\]"):
            MoEKernelConfig(block_m=64, register_operand=True, steps_per_stage=steps)
    from quickmoe.kernels.moe_gemm_register import moe_gemm1_swiglu_register, moe_gemm2_register

    for gemm, num_args in ((moe_gemm1_swiglu_register, 9), (moe_gemm2_register, 6)):  # checked before the operands
        with pytest.raises(ConfigError, match=r"steps_per_stage = 3: expected one of \[1, 2\]"):
            gemm(*[None] * num_args, steps_per_stage=3)


def test_both_gemms_hand_the_config_s_stages_and_steps_per_stage_to_the_register_kernels(monkeypatch):
    """The two K steps a stage and a register cap give the same bits as one step and none (the GPU tests), so only
    the call shows whether `moe_gemm1_swiglu` / `moe_gemm2` pass a config's steps_per_stage, num_stages and maxnreg
    on: the kernels are replaced by
    recorders here, and the operand check says they can run."""
    import quickmoe.kernels.moe_gemm_register as register
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2

    calls = []
    monkeypatch.setattr(register, "register_operand_problem", lambda *a, **k: "")
    monkeypatch.setattr(register, "moe_gemm1_swiglu_register", lambda *a, **k: calls.append(("gemm1", k)))
    monkeypatch.setattr(register, "moe_gemm2_register", lambda *a, **k: calls.append(("gemm2", k)))
    g = torch.Generator().manual_seed(6)
    w1, s1, b1 = _mxfp4_experts(4, 128, 128, g)
    x = torch.randn(9, 128, generator=g).to(torch.bfloat16)
    weights, ids = _routing(9, 4, 2, g)
    align = moe_align_ref(ids, 4, 32)
    config = MoEKernelConfig(block_m=32, block_n=64, block_k=64, num_warps=4, num_stages=2, register_operand=True,
                             steps_per_stage=2, maxnreg=104)
    moe_gemm1_swiglu(x.to(DEVICE), align, 2, w1, b1, s1, 64, 7.0, 1.702, config=config)
    w2, s2, b2 = _mxfp4_experts(4, 128, 64, g)
    moe_gemm2(torch.randn(18, 128, generator=g).to(torch.bfloat16).to(DEVICE), align, weights.to(DEVICE), w2,
              b2[:, :128], s2[:, :, :128], config=config)
    assert calls == [("gemm1", {"stages": 2, "steps_per_stage": 2, "maxnreg": 104}),
                     ("gemm2", {"stages": 2, "steps_per_stage": 2, "maxnreg": 104})]


_COMPILE_FOR_HOPPER = """
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from quickmoe.kernels import moe_gemm_register as reg
from quickmoe.kernels.moe_configs import REGISTER_OPERAND_ROWS

gemm, hidden, intermediate, sub, gathered = (int(a) for a in sys.argv[1:6])
found = {}
for block_m in REGISTER_OPERAND_ROWS:
    half = reg._half(block_m)
    signature = {f"x{name}_desc": (f"tensordesc<bf16[{rows}, 64],"
                                   f"{gl.NVMMASharedLayout.get_default_for([rows, 64], gl.bfloat16)!r}>")
                 for name, rows in (("", block_m), ("_half", half))}
    signature["w_desc"] = f"tensordesc<u8[128, {32 * sub}],{reg.packed_bytes_layout(sub)!r}>"
    if gemm == 1:
        signature["w_rows_desc"] = f"tensordesc<u8[64, {32 * sub}],{reg.packed_bytes_layout(sub)!r}>"
    signature.update({"s_ptr": "*u8",
                      "bias_ptr": "*bf16"})
    signature.update({"out_ptr": "*bf16"} if gemm == 1 else {"route_w_ptr": "*fp32", "out_ptr": "*bf16"})
    signature.update({"sorted_ids_ptr": "*i32", "block_expert_ptr": "*i32", "num_padded_ptr": "*i32",
                      "num_assignments": "i32", "num_m": "i32"})
    if gemm == 1:
        signature.update({"limit": "fp32", "alpha": "fp32"})
    constexprs = dict(H=hidden, I=intermediate, BM=block_m, HALF=half, STAGES=3, HAS_BIAS=True, SUB=sub, num_warps=4)
    if gemm == 1:
        constexprs["RAGGED"] = intermediate % 64 != 0
        constexprs["GATHERED"] = bool(gathered)
    signature.update({name: "constexpr" for name in constexprs})
    kernel = reg._gemm1_register_kernel if gemm == 1 else reg._gemm2_register_kernel
    compiled = triton.compile(GluonASTSource(kernel, signature, constexprs), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": 4})
    found[block_m] = sorted({int(n) for n in re.findall(r"wgmma\\.mma_async\\.sync\\.aligned\\.m64n(\\d+)k16",
                                                            compiled.asm["ptx"])})
print(json.dumps(found))
"""


@pytest.mark.parametrize("gemm,hidden,intermediate,sub,gathered",
                         [(1, 256, 256, 1, 0), (2, 256, 256, 1, 0), (1, 192, 160, 1, 0), (2, 192, 160, 1, 0),
                          (1, 192, 160, 2, 1), (2, 192, 160, 2, 0), (1, 256, 256, 2, 1)])
def test_both_kernels_compile_for_hopper_at_every_tile_and_its_half(gemm, hidden, intermediate, sub, gathered):
    """Compiled for sm_90 in a process without the interpreter (no GPU needed), also where I = 160 gives GEMM 1 a
    ragged last gate/up group and GEMM 2 a ragged last K step (as at tensor parallel 2 of gpt-oss), and with two K
    steps a pipeline stage (`steps_per_stage`; K = 192 or 160: three steps, the last stage's second past K), and GEMM
    1 storing GEMM 2's gathered operand (`gathered_out`): each
    kernel's wgmma takes the tile's rows and, for tiles of 16 rows or more, half of them (a tile whose valid rows
    fit half runs on half) as its N side; a tile of 8 rows has no half (wgmma's N is at least 8: a plain BM // 2
    gives 4, which does not compile)."""
    import json
    import os
    import subprocess
    import sys

    from quickmoe.kernels import moe_gemm_register as reg

    if reg.gluon is None:
        pytest.skip("a triton with Gluon")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", _COMPILE_FOR_HOPPER, str(gemm), str(hidden), str(intermediate),
                           str(sub), str(gathered)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found == {"8": [8], "16": [8, 16], "32": [16, 32], "64": [32, 64]}


def _mxfp4_experts(num_experts, hidden, inter, g):
    blocks = torch.randint(0, 256, (num_experts, 2 * inter, hidden // 2), dtype=torch.uint8, generator=g)
    scales = torch.randint(122, 128, (num_experts, hidden // 32, 2 * inter), dtype=torch.uint8, generator=g)
    bias = torch.randn(num_experts, 2 * inter, generator=g).to(torch.bfloat16)
    return blocks.to(DEVICE), scales.to(DEVICE), bias.to(DEVICE)


@pytest.mark.skipif(DEVICE != "cpu", reason="the fall-back path: a device where the kernel cannot run")
def test_a_register_operand_config_falls_back_to_its_triton_tile_where_the_kernel_cannot_run(caplog):
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu

    g = torch.Generator().manual_seed(3)
    w1, s1, b1 = _mxfp4_experts(4, 128, 128, g)
    x = torch.randn(9, 128, generator=g).to(torch.bfloat16)
    _, ids = _routing(9, 4, 2, g)
    align = moe_align_ref(ids, 4, 32)
    plain = MoEKernelConfig(block_m=32, block_n=64, block_k=64, num_warps=4, num_stages=2)
    with caplog.at_level(logging.INFO, logger="quickmoe.kernels.moe_gemm"):
        got = moe_gemm1_swiglu(x, align, 2, w1, b1, s1, 64, 7.0, 1.702,
                               config=MoEKernelConfig(**{**plain.__dict__, "register_operand": True}))
    assert "register-operand kernel needs a Hopper GPU" in caplog.text
    assert torch.equal(got, moe_gemm1_swiglu(x, align, 2, w1, b1, s1, 64, 7.0, 1.702, config=plain))
    assert register_operand_problem(x, w1, s1, None, 32, 1, group=64, activation="swiglu_gpt_oss") == (
        "a Hopper GPU (wgmma)")


def _hopper() -> bool:
    return DEVICE == "cuda" and torch.cuda.get_device_capability()[0] == 9


@pytest.mark.gpu
@pytest.mark.skipif(not _hopper(), reason="wgmma: a Hopper GPU")
@pytest.mark.parametrize("num_tokens,block_m,crowd", [(5, 8, 0), (60, 8, 1), (3, 16, 0), (130, 16, 1), (3, 32, 0),
                                                     (100, 32, 1), (256, 64, 0), (700, 64, 1)])
def test_the_register_operand_kernel_matches_the_float32_reference(num_tokens, block_m, crowd):
    """gpt-oss-20b-shaped MXFP4 experts: every assignment's row within bf16 rounding of the float32 reference, with
    tiles half filled (the half-width loop), full, several tiles of one expert (crowd) and an expert with none."""
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_gemm_register import moe_gemm1_swiglu_register

    spec = SHAPES["gpt-oss-20b"]
    g = torch.Generator().manual_seed(num_tokens + block_m)
    ex = make_experts(spec, "mxfp4", torch.device("cuda"), g)
    x = torch.randn(num_tokens, spec.hidden, generator=g).to(torch.bfloat16).cuda()
    _, ids = _routing(num_tokens, spec.experts, spec.top_k, g, crowd)
    align = moe_align(ids.cuda(), spec.experts, block_m)
    args = (x, align, spec.top_k, ex.w1, ex.b1, ex.kwargs["w1_scales"], GROUP, 7.0, 1.702)
    got = moe_gemm1_swiglu_register(*args)
    want = moe_gemm1_swiglu_register_ref(*args).float()
    scale = want.abs().max()
    assert scale > 0
    err = ((got.float() - want).abs().max() / scale).item()
    assert err < 1e-2, err  # bf16 outputs of bf16 products summed in float32 (4.5e-3 measured)
    for stages in (2, 3):  # two K steps a stage, their weights one swizzled box of 64 bytes a row: the same sums in
        # the same order
        assert torch.equal(moe_gemm1_swiglu_register(*args, stages=stages, steps_per_stage=2), got)
    assert torch.equal(moe_gemm1_swiglu_register(*args, steps_per_stage=2, maxnreg=128), got)  # a register cap


@pytest.mark.gpu
@pytest.mark.skipif(not _hopper(), reason="wgmma: a Hopper GPU")
def test_gemm1_hands_a_register_operand_config_to_the_kernel():
    """`moe_gemm1_swiglu` with a `register_operand` config gives the Gluon kernel's bits (bf16), and its Triton tile
    where the activations are float32."""
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu
    from quickmoe.kernels.moe_gemm_register import moe_gemm1_swiglu_register

    spec = SHAPES["gpt-oss-20b"]
    g = torch.Generator().manual_seed(11)
    ex = make_experts(spec, "mxfp4", torch.device("cuda"), g)
    x = torch.randn(200, spec.hidden, generator=g).to(torch.bfloat16).cuda()
    _, ids = _routing(200, spec.experts, spec.top_k, g)
    align = moe_align(ids.cuda(), spec.experts, 64)
    tile = MoEKernelConfig(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=3, group_m=8,
                           gate_up_one_dot=True)
    config = MoEKernelConfig(**{**tile.__dict__, "register_operand": True})
    args = (align, spec.top_k, ex.w1, ex.b1, ex.kwargs["w1_scales"], GROUP, 7.0, 1.702)
    assert torch.equal(moe_gemm1_swiglu(x, *args, config=config), moe_gemm1_swiglu_register(x, *args))
    x32 = x.float()
    assert torch.equal(moe_gemm1_swiglu(x32, *args, config=config), moe_gemm1_swiglu(x32, *args, config=tile))


@pytest.mark.skipif(DEVICE != "cpu", reason="the fall-back path: a device where the kernel cannot run")
def test_a_register_operand_gemm2_config_falls_back_to_its_triton_tile_where_the_kernel_cannot_run():
    from quickmoe.kernels.moe_gemm import moe_gemm2

    g = torch.Generator().manual_seed(4)
    w2, s2, b2 = _mxfp4_experts(4, 128, 64, g)  # [E, 128, 64] packed: H = 128 rows, I = 128
    inter = torch.randn(18, 128, generator=g).to(torch.bfloat16)
    weights, ids = _routing(9, 4, 2, g)
    align = moe_align_ref(ids, 4, 32)
    plain = MoEKernelConfig(block_m=32, block_n=64, block_k=64, num_warps=4, num_stages=2)
    got = moe_gemm2(inter, align, weights, w2, b2[:, :128], s2[:, :, :128],
                    config=MoEKernelConfig(**{**plain.__dict__, "register_operand": True}))
    assert torch.equal(got, moe_gemm2(inter, align, weights, w2, b2[:, :128], s2[:, :, :128], config=plain))


@pytest.mark.gpu
@pytest.mark.skipif(not _hopper(), reason="wgmma: a Hopper GPU")
@pytest.mark.parametrize("num_tokens,block_m,crowd", [(5, 8, 0), (60, 8, 1), (3, 16, 0), (130, 16, 1), (3, 32, 0),
                                                     (100, 32, 1), (256, 64, 0), (700, 64, 1)])
def test_the_register_operand_gemm2_matches_the_float32_reference(num_tokens, block_m, crowd):
    """GEMM 2 on gpt-oss-20b-shaped experts: H = 2,880 output columns (the last program's 64 past H masked), bias
    and routing weight, within bf16 rounding of the float32 reference; `moe_gemm2` with a `register_operand` config
    gives the kernel's bits."""
    from quickmoe.bench.moe_experts import SHAPES, make_experts
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_gemm import moe_gemm2
    from quickmoe.kernels.moe_gemm_register import moe_gemm2_register, moe_gemm2_register_ref

    spec = SHAPES["gpt-oss-20b"]
    g = torch.Generator().manual_seed(3 * num_tokens + block_m)
    ex = make_experts(spec, "mxfp4", torch.device("cuda"), g)
    inter = torch.randn(num_tokens * spec.top_k, spec.inter, generator=g).to(torch.bfloat16).cuda()
    weights, ids = _routing(num_tokens, spec.experts, spec.top_k, g, crowd)
    align = moe_align(ids.cuda(), spec.experts, block_m)
    args = (inter, align, weights.cuda(), ex.w2, ex.b2, ex.kwargs["w2_scales"])
    got = moe_gemm2_register(*args)
    want = moe_gemm2_register_ref(*args).float()
    scale = want.abs().max()
    assert scale > 0
    err = ((got.float() - want).abs().max() / scale).item()
    assert err < 1e-2, err  # 2.5e-3 measured
    for stages in (2, 3):  # two K steps a stage (45 steps of I = 2,880: the last stage's second step past K)
        assert torch.equal(moe_gemm2_register(*args, stages=stages, steps_per_stage=2), got)
    assert torch.equal(moe_gemm2_register(*args, steps_per_stage=2, maxnreg=120), got)  # a register cap
    config = MoEKernelConfig(block_m=block_m, block_n=128, block_k=64, num_warps=4, num_stages=3,
                             swap_ab=block_m == 8, register_operand=True)
    assert torch.equal(moe_gemm2(*args, config=config), got)


@pytest.mark.gpu
@pytest.mark.skipif(not _hopper(), reason="wgmma: a Hopper GPU")
@pytest.mark.parametrize("num_tokens,block_m,crowd", [(5, 8, 0), (130, 16, 1), (3, 32, 0), (100, 32, 1), (256, 32, 0),
                                                     (700, 64, 1)])
def test_both_register_operand_gemms_take_a_rank_s_experts_at_tensor_parallel_2(num_tokens, block_m, crowd):
    """gpt-oss-20b's experts split over two ranks (I = 1,440 a rank): GEMM 1's last gate/up group holds 32 gate and
    32 up rows (its up rows start 32 rows after its gate rows, not 64) and GEMM 2's K = 1,440 ends in half a step.
    Both kernels within bf16 rounding of the float32 reference, and `moe_gemm1_swiglu` / `moe_gemm2` with a
    `register_operand` config give their bits (they no longer decline these operands)."""
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels.moe_align import moe_align
    from quickmoe.kernels.moe_gemm import moe_gemm1_swiglu, moe_gemm2
    from quickmoe.kernels.moe_gemm_register import (
        moe_gemm1_swiglu_register,
        moe_gemm2_register,
        moe_gemm2_register_ref,
    )

    spec = SHAPES["gpt-oss-20b-tp2"]
    g = torch.Generator().manual_seed(5 * num_tokens + block_m)
    ex = make_experts(spec, "mxfp4", torch.device("cuda"), g)
    assert spec.inter % 64 == 32
    x = torch.randn(num_tokens, spec.hidden, generator=g).to(torch.bfloat16).cuda()
    inter = torch.randn(num_tokens * spec.top_k, spec.inter, generator=g).to(torch.bfloat16).cuda()
    weights, ids = _routing(num_tokens, spec.experts, spec.top_k, g, crowd)
    align = moe_align(ids.cuda(), spec.experts, block_m)
    config = MoEKernelConfig(block_m=block_m, block_n=64, block_k=64, num_warps=4, num_stages=3,
                             swap_ab=block_m == 8, register_operand=True)
    args1 = (x, align, spec.top_k, ex.w1, ex.b1, ex.kwargs["w1_scales"], GROUP, 7.0, 1.702)
    args2 = (inter, align, weights.cuda(), ex.w2, ex.b2, ex.kwargs["w2_scales"])
    # two steps a stage: the ragged group's two weight boxes of 64 rows, 64 bytes a row
    assert torch.equal(moe_gemm1_swiglu_register(*args1, steps_per_stage=2), moe_gemm1_swiglu_register(*args1))
    assert torch.equal(moe_gemm2_register(*args2, steps_per_stage=2), moe_gemm2_register(*args2))
    for got, want, same in ((moe_gemm1_swiglu_register(*args1), moe_gemm1_swiglu_register_ref(*args1),
                             moe_gemm1_swiglu(*args1, config=config)),
                            (moe_gemm2_register(*args2), moe_gemm2_register_ref(*args2),
                             moe_gemm2(*args2, config=config))):
        want = want.float()
        scale = want.abs().max()
        assert scale > 0
        err = ((got.float() - want).abs().max() / scale).item()
        assert err < 1e-2, err
        assert torch.equal(same, got)


@pytest.mark.gpu
@pytest.mark.skipif(not _hopper(), reason="wgmma: a Hopper GPU")
@pytest.mark.parametrize("shape,num_tokens,block_m,crowd", [("gpt-oss-20b", 5, 8, 0), ("gpt-oss-20b", 60, 32, 1),
                                                           ("gpt-oss-20b", 256, 64, 0), ("gpt-oss-20b", 700, 64, 1),
                                                           ("gpt-oss-20b-tp2", 130, 16, 1),
                                                           ("gpt-oss-20b-tp2", 256, 32, 0)])
def test_gemm1_stores_gemm2_s_gathered_operand_and_fused_moe_gives_the_same_bits(shape, num_tokens, block_m, crowd):
    """`gathered_out`: GEMM 1's epilogue stores GEMM 2's operand itself. Every used row of it equals
    `gather_permuted_rows` of the plain output (the columns of each step in the logical order, and at tensor parallel
    2, I = 1,440, the last step's columns past I zero), and `fused_moe` on the register-operand kernels, which takes
    that path, gives the bits of the two GEMMs with the gather between them."""
    import unittest.mock as mock

    import quickmoe.kernels.moe_gemm_register as register
    from quickmoe.bench.moe_experts import GROUP, SHAPES, make_experts
    from quickmoe.kernels import fused_moe as fused
    from quickmoe.kernels.moe_align import moe_align

    spec = SHAPES[shape]
    g = torch.Generator().manual_seed(7 * num_tokens + block_m)
    ex = make_experts(spec, "mxfp4", torch.device("cuda"), g)
    x = torch.randn(num_tokens, spec.hidden, generator=g).to(torch.bfloat16).cuda()
    weights, ids = _routing(num_tokens, spec.experts, spec.top_k, g, crowd)
    weights, ids = weights.cuda(), ids.cuda()
    align = moe_align(ids, spec.experts, block_m)
    args1 = (x, align, spec.top_k, ex.w1, ex.b1, ex.kwargs["w1_scales"], GROUP, 7.0, 1.702)
    plain = register.moe_gemm1_swiglu_register(*args1)
    gathered = register.moe_gemm1_swiglu_register(*args1, gathered_out=True)
    want = gather_permuted_rows_ref(plain, align, 1)
    used = int(align.num_padded.item())
    valid = align.sorted_ids[:used] < align.num_assignments
    assert valid.sum() == ids.numel()
    assert torch.equal(gathered[:used][valid], want[:used][valid])
    args2 = (align, weights, ex.w2, ex.b2, ex.kwargs["w2_scales"])
    assert torch.equal(register.moe_gemm2_register(gathered, *args2, gathered=True),
                       register.moe_gemm2_register(plain, *args2))
    with pytest.raises(ConfigError, match="GEMM 2's gathered operand: expected"):
        register.moe_gemm2_register(plain, *args2, gathered=True)

    config = MoEKernelConfig(block_m=block_m, block_n=64, block_k=64, num_warps=4, num_stages=3,
                             swap_ab=block_m == 8, register_operand=True)
    kwargs = dict(w1_scales=ex.kwargs["w1_scales"], w2_scales=ex.kwargs["w2_scales"], gate_up_group=GROUP)
    run = lambda: fused.fused_moe(x, weights, ids, ex.w1, ex.b1, ex.w2, ex.b2, **kwargs)  # noqa: E731
    with mock.patch("quickmoe.kernels.moe_configs.moe_kernel_config", lambda *a, **k: config):
        paired = run()
        with mock.patch.object(register, "register_pair", lambda *a, **k: False):
            apart = run()
    assert torch.equal(paired, apart)


def test_fused_moe_hands_gemm2_the_operand_gemm1_stored_when_both_run_the_register_kernels(monkeypatch):
    """Where both GEMMs' configs ask for the register-operand kernels and both can run (the check stubbed here, the
    kernels replaced by recorders), `fused_moe` has GEMM 1 store GEMM 2's gathered operand and hands GEMM 2 that
    operand with `gathered`; where GEMM 2's config asks for the Triton tile, no gathered operand is made."""
    import quickmoe.kernels.moe_gemm_register as register
    from quickmoe.kernels.fused_moe import fused_moe

    calls = []

    def gemm1(acts, *args, **kwargs):
        calls.append(("gemm1", kwargs))
        return torch.zeros(1, device=acts.device)

    def gemm2(acts, align, topk_weights, *args, **kwargs):  # on the activations' device: the combine runs there
        calls.append(("gemm2", kwargs))
        return torch.zeros(align.num_assignments, 128, dtype=torch.bfloat16, device=acts.device)

    monkeypatch.setattr(register, "register_operand_problem", lambda *a, **k: "")
    monkeypatch.setattr(register, "moe_gemm1_swiglu_register", gemm1)
    monkeypatch.setattr(register, "moe_gemm2_register", gemm2)
    g = torch.Generator().manual_seed(8)
    w1, s1, b1 = (t.to(DEVICE) for t in _mxfp4_experts(4, 128, 128, g))
    w2, s2, b2 = (t.to(DEVICE) for t in _mxfp4_experts(4, 128, 64, g))
    x = torch.randn(9, 128, generator=g).to(torch.bfloat16)
    weights, ids = _routing(9, 4, 2, g)
    reg = MoEKernelConfig(block_m=32, block_n=64, block_k=64, num_warps=4, num_stages=2, register_operand=True,
                          steps_per_stage=2, maxnreg=120)
    tile = MoEKernelConfig(block_m=32, block_n=64, block_k=64, num_warps=4, num_stages=2)
    kwargs = dict(w1_scales=s1, w2_scales=s2[:, :, :128], gate_up_group=64)
    monkeypatch.setattr("quickmoe.kernels.moe_configs.moe_kernel_config", lambda *a, **k: reg)
    fused_moe(x.to(DEVICE), weights.to(DEVICE), ids.to(DEVICE), w1, b1, w2, b2[:, :128], **kwargs)
    assert calls == [("gemm1", {"stages": 2, "steps_per_stage": 2, "maxnreg": 120, "gathered_out": True}),
                     ("gemm2", {"stages": 2, "steps_per_stage": 2, "maxnreg": 120, "gathered": True})]
    calls.clear()
    monkeypatch.setattr("quickmoe.kernels.moe_configs.moe_kernel_config",
                        lambda *a, proj, **k: reg if proj == "gate_up" else tile)
    monkeypatch.setattr(register, "moe_gemm1_swiglu_register",
                        lambda *a, **k: calls.append(("gemm1", k)) or torch.zeros(18, 128, dtype=torch.bfloat16,
                                                                                 device=DEVICE))
    fused_moe(x.to(DEVICE), weights.to(DEVICE), ids.to(DEVICE), w1, b1, w2, b2[:, :128], **kwargs)
    assert calls == [("gemm1", {"stages": 2, "steps_per_stage": 2, "maxnreg": 120})]


def test_the_check_accepts_gpt_oss_20b_decode_batches_on_hopper_and_names_what_else_is_missing(monkeypatch):
    """On a Hopper GPU (the device check stubbed: this runs anywhere) gpt-oss-20b's bf16 activations and MXFP4 experts
    pass for both GEMMs at tiles of 8, 16, 32 and 64 rows; each thing the kernels need, taken away, is named."""
    import quickmoe.kernels.moe_gemm_register as register

    monkeypatch.setattr(register, "_hopper", lambda device: True)
    if register.gluon is None:
        pytest.skip("a triton without Gluon")
    acts = torch.empty(4, 2880, dtype=torch.bfloat16)
    w1, s1 = torch.empty(32, 5760, 1440, dtype=torch.uint8), torch.empty(32, 90, 5760, dtype=torch.uint8)
    w2, s2 = torch.empty(32, 2880, 1440, dtype=torch.uint8), torch.empty(32, 90, 2880, dtype=torch.uint8)
    gemm1 = dict(group=64, activation="swiglu_gpt_oss")
    for block_m in (8, 16, 32, 64):
        assert register_operand_problem(acts, w1, s1, None, block_m, 1, **gemm1) == ""
        assert register_operand_problem(acts, w2, s2, None, block_m, 1) == ""
    # a rank's experts at tensor parallel 2: a ragged last gate/up group (I = 1,440), and GEMM 2's K = 1,440
    w1_tp2, s1_tp2 = torch.empty(32, 2880, 1440, dtype=torch.uint8), torch.empty(32, 90, 2880, dtype=torch.uint8)
    w2_tp2, s2_tp2 = torch.empty(32, 2880, 720, dtype=torch.uint8), torch.empty(32, 45, 2880, dtype=torch.uint8)
    assert register_operand_problem(acts, w1_tp2, s1_tp2, None, 32, 1, **gemm1) == ""
    assert register_operand_problem(acts[:, :1440], w2_tp2, s2_tp2, None, 32, 1) == ""
    assert register_operand_problem(acts, w2[:, :, :1432].contiguous(), s2, None, 64, 1) == "K a multiple of 32"
    assert register_operand_problem(acts.float(), w1, s1, None, 64, 1, **gemm1) == "bf16 activations"
    for block_m, split_k in ((128, 1), (4, 1), (64, 2)):
        assert register_operand_problem(acts, w1, s1, None, block_m, split_k, **gemm1) == (
            "tiles of 8, 16, 32 or 64 rows and one part of K")
    assert register_operand_problem(acts, w1, s1, None, 64, 1, group=64, activation="silu") == (
        "gate/up groups of 64 and gpt-oss's SwiGLU")
    assert register_operand_problem(acts, w1, s1.view(torch.float8_e4m3fn), None, 64, 1, **gemm1) == (
        "contiguous MXFP4 weights")
    assert register_operand_problem(acts, w2[:, :, :1400], s2, None, 64, 1) == "contiguous MXFP4 weights"

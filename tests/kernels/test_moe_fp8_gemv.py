"""`moe_fp8_gemv` (the FP8 MoE of a few tokens on CUDA cores; Triton's interpreter on CPU) against
`moe_fp8_gemv_ref` (each assignment through `fused_moe_ref` with FP8 activations), and `fused_moe`'s choice of it.

The kernels quantize their activations themselves (`fp8_quant.quantize_group`); the reference quantizes them with
the torch quantizer. Their float32 sums differ only in order, so a quantizer that rounds one value differently, a
scale applied to the wrong rows or a gate row read as an up row moves the result by far more than the 1e-5 bound."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels import fused_moe as fused_moe_module
from quickmoe.kernels.fused_moe import fused_moe, fused_moe_ref
from quickmoe.kernels.moe_fp8_gemv import Fp8GemvConfig, moe_fp8_gemv, moe_fp8_gemv_ref
from quickmoe.kernels.routing import route_ref

pytest.importorskip("triton")
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _fp8_experts(e: int, hidden: int, inter: int, g: torch.Generator, scale_rows: tuple[int, int]):
    def fp8(n, k, rows):  # e4m3 [E, n, k] and scales [E, k/128, n/rows]: one per `rows` kernel rows
        q = (torch.randn(e, n, k, generator=g) * 32).clamp(-448, 448).to(torch.float8_e4m3fn)
        scales = (torch.rand(e, k // 128, n // rows, generator=g) + 0.5) * k ** -0.5 / 32
        return q.to(DEVICE), scales.to(DEVICE)

    (w1, s1), (w2, s2) = fp8(2 * inter, hidden, scale_rows[0]), fp8(hidden, inter, scale_rows[1])
    return w1, s1, w2, s2


def _routing(num_tokens: int, num_experts: int, top_k: int, g: torch.Generator):
    logits = torch.randn(num_tokens, num_experts, generator=g).to(DEVICE)
    return route_ref(logits, top_k, scoring="softmax_topk", renormalize=True)


@pytest.mark.parametrize("num_tokens,top_k,hidden,inter,group,scale_rows,bias,activation,rows,groups", [
    (1, 4, 512, 256, 64, (16, 32), False, "silu", (16, 16), (4, 2)),  # T = 1; a scale per 16 / 32 rows
    (3, 2, 256, 384, 256, (1, 128), True, "swiglu_gpt_oss", (32, 8), (1, 4)),  # ragged gate/up group; biases;
    # GEMV 2's 3 groups of K taken one a step although 4 were asked for
    (2, 2, 256, 768, 128, (128, 1), False, "silu", (8, 32), (2, 4)),  # a scale per row in GEMM 2; 6 groups of K,
    # 2 a step
    (2, 2, 256, 128, 128, (8, 8), False, "silu", (8, 16), (1, 1)),  # one group; one 128-column group a step
])
def test_gemv_matches_the_reference(num_tokens, top_k, hidden, inter, group, scale_rows, bias, activation, rows,
                                    groups):
    g = torch.Generator().manual_seed(num_tokens * 7 + inter + group + hidden)
    e = 8
    w1, s1, w2, s2 = _fp8_experts(e, hidden, inter, g, scale_rows)
    b1 = (torch.randn(e, 2 * inter, generator=g) * 0.1).to(DEVICE) if bias else None
    b2 = (torch.randn(e, hidden, generator=g) * 0.1).to(DEVICE) if bias else None
    x = torch.randn(num_tokens, hidden, generator=g).to(DEVICE)
    weights, ids = _routing(num_tokens, e, top_k, g)
    kw = dict(gate_up_group=group, activation=activation)
    got = moe_fp8_gemv(x, weights, ids, w1, b1, s1, w2, b2, s2,
                       config=Fp8GemvConfig(rows1=rows[0], rows2=rows[1], warps1=2, warps2=1, groups1=groups[0],
                                            groups2=groups[1]), **kw)
    want = moe_fp8_gemv_ref(x, weights, ids.long(), w1, b1, s1, w2, b2, s2, **kw)
    assert got.shape == (num_tokens * top_k, hidden) and torch.isfinite(want).all() and want.std() > 0
    assert (got - want).norm() / want.norm() < 1e-5
    # the rows are each assignment's, weighted: their sums per token are the reference MoE's output
    combined = fused_moe_ref(x, weights, ids.long(), w1, b1, w2, b2, w1_scales=s1, w2_scales=s2,
                             fp8_activations=True, **kw)
    assert (got.view(num_tokens, top_k, hidden).sum(1) - combined).norm() / combined.norm() < 1e-5
    plain = fused_moe_ref(x, weights, ids.long(), w1, b1, w2, b2, w1_scales=s1, w2_scales=s2, **kw)
    assert (combined - plain).norm() / plain.norm() > 1e-3  # the activations really went through FP8


@pytest.mark.parametrize("num_tokens,max_k", [(1, 2048), (4, 2048), (5, 2048), (1, 64)])
def test_fused_moe_runs_fp8_experts_of_few_tokens_on_the_gemv(monkeypatch, num_tokens, max_k):
    """Up to `fp8_gemv_max_tokens` tokens, and with K up to FP8_GEMV_MAX_K, `fused_moe` hands FP8 experts to the
    GEMV (no alignment), else to the tensor-core GEMMs; both give the reference's result, combined or not."""
    from quickmoe.kernels import moe_fp8_gemv as gemv_module

    calls = []
    real = gemv_module.moe_fp8_gemv
    monkeypatch.setattr(gemv_module, "moe_fp8_gemv", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(fused_moe_module, "fp8_gemv_max_tokens", lambda device: 4)
    monkeypatch.setattr(fused_moe_module, "FP8_GEMV_MAX_K", max_k)
    g = torch.Generator().manual_seed(num_tokens)
    w1, s1, w2, s2 = _fp8_experts(8, 128, 128, g, (1, 1))
    x = torch.randn(num_tokens, 128, generator=g).to(DEVICE)
    weights, ids = _routing(num_tokens, 8, 2, g)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64, activation="silu")
    got = fused_moe(x, weights, ids, w1, None, w2, None, **kw)
    rows = fused_moe(x, weights, ids, w1, None, w2, None, combine=False, **kw)
    assert len(calls) == (2 if num_tokens <= 4 and max_k >= 128 else 0)
    want = fused_moe_ref(x, weights, ids.long(), w1, None, w2, None, fp8_activations=True, **kw)
    assert (got - want).norm() / want.norm() < 1e-5
    assert rows.shape == (num_tokens, 2, 128) and torch.equal(rows.float().sum(1).to(got.dtype), got)


@pytest.mark.parametrize("num_tokens", [1, 3, 6])
def test_the_gemv_skips_absent_assignments(monkeypatch, num_tokens):
    """Id E (no expert here: another rank's assignment, or a CUDA graph's padding row's) with a non-zero weight:
    the GEMV computes the other assignments as the reference does and `fused_moe` (absent_experts, on the GEMV)
    leaves E's rows out of the combine: its result is the sum of the reference's other assignments. The
    GEMV's absent rows are poisoned with NaN (what unwritten memory may hold)."""
    from quickmoe.kernels import moe_fp8_gemv as gemv_module

    real = gemv_module.moe_fp8_gemv

    def poisoned(hidden, weights, ids, *args, **kwargs):
        out = real(hidden, weights, ids, *args, **kwargs)  # [A, H]
        calls.append(1)
        return out.masked_fill((ids == e).reshape(-1, 1), float("nan"))

    calls = []
    monkeypatch.setattr(gemv_module, "moe_fp8_gemv", poisoned)
    monkeypatch.setattr(fused_moe_module, "fp8_gemv_max_tokens", lambda device: 8)
    g = torch.Generator().manual_seed(num_tokens + 60)
    e, hidden, inter, top_k = 8, 256, 128, 4
    w1, s1, w2, s2 = _fp8_experts(e, hidden, inter, g, (1, 1))
    x = torch.randn(num_tokens, hidden, generator=g).to(DEVICE)
    weights, ids = _routing(num_tokens, e, top_k, g)
    absent = torch.rand(num_tokens, top_k, generator=g).to(DEVICE) < 0.4  # [T, k]
    absent[0, 0], absent[-1, -1] = True, False
    ids = torch.where(absent, e, ids).to(torch.int32)
    kw = dict(gate_up_group=64, activation="silu")
    rows = real(x, weights, ids, w1, None, s1, w2, None, s2, **kw)  # [A, H]
    want_rows = moe_fp8_gemv_ref(x, weights, ids.long(), w1, None, s1, w2, None, s2, **kw)
    kept = ~absent.reshape(-1)
    assert (rows[kept] - want_rows[kept]).norm() / want_rows[kept].norm() < 1e-5
    assert (want_rows[~kept] == 0).all()
    got = fused_moe(x, weights, ids, w1, None, w2, None, w1_scales=s1, w2_scales=s2, absent_experts=True, **kw)
    assert calls and torch.isfinite(got).all()
    want = want_rows.view(num_tokens, top_k, hidden).sum(1)  # each assignment alone, as the GEMV computes it:
    # the reference over a whole expert's rows may round one activation to another FP8 step
    assert (got - want).norm() / want.norm() < 1e-5


@pytest.mark.parametrize("num_tokens", [2, 12])  # the GEMV, the tensor-core GEMMs
def test_fp8_experts_take_activations_quantized_beside_the_norm(monkeypatch, num_tokens):
    """`fused_moe(..., hidden_q=, hidden_scales=)`: FP8 experts use the given quantized activations instead of
    quantizing hidden (the norm before them made them: `rms_norm.fused_add_rms_norm_fp8`), so given another row's
    quantization the result is that row's, bit for bit."""
    from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group

    monkeypatch.setattr(fused_moe_module, "fp8_gemv_max_tokens", lambda device: 8)
    g = torch.Generator().manual_seed(num_tokens + 40)
    w1, s1, w2, s2 = _fp8_experts(8, 128, 128, g, (1, 1))
    x, other = (torch.randn(num_tokens, 128, generator=g).to(DEVICE) for _ in range(2))
    weights, ids = _routing(num_tokens, 8, 2, g)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64, activation="silu", combine=False)
    q, scales = quantize_fp8_per_token_group(other)
    got = fused_moe(x, weights, ids, w1, None, w2, None, hidden_q=q, hidden_scales=scales, **kw)
    assert torch.equal(got, fused_moe(other, weights, ids, w1, None, w2, None, **kw))
    assert not torch.equal(got, fused_moe(x, weights, ids, w1, None, w2, None, **kw))


def test_the_token_bound_comes_from_the_environment(monkeypatch):
    fused_moe_module.fp8_gemv_max_tokens.cache_clear()
    try:
        assert fused_moe_module.fp8_gemv_max_tokens(torch.device("cpu")) == fused_moe_module.FP8_GEMV_MAX_TOKENS
        fused_moe_module.fp8_gemv_max_tokens.cache_clear()
        monkeypatch.setenv("QUICKMOE_FP8_GEMV_MAX_TOKENS", "0")
        assert fused_moe_module.fp8_gemv_max_tokens(torch.device("cpu")) == 0
        fused_moe_module.fp8_gemv_max_tokens.cache_clear()
        monkeypatch.setenv("QUICKMOE_FP8_GEMV_MAX_TOKENS", "few")
        with pytest.raises(ValueError, match="QUICKMOE_FP8_GEMV_MAX_TOKENS = 'few': expected a number of tokens"):
            fused_moe_module.fp8_gemv_max_tokens(torch.device("cpu"))
    finally:
        fused_moe_module.fp8_gemv_max_tokens.cache_clear()


def test_gemv_refuses_what_it_cannot_run():
    g = torch.Generator().manual_seed(3)
    w1, s1, w2, s2 = _fp8_experts(4, 128, 128, g, (1, 1))
    x = torch.randn(1, 128, generator=g).to(DEVICE)
    weights, ids = _routing(1, 4, 2, g)
    with pytest.raises(ValueError, match="gate_up_group = 48: expected a power of two"):
        moe_fp8_gemv(x, weights, ids, w1, None, s1, w2, None, s2, gate_up_group=48)
    with pytest.raises(ValueError, match="expected float8_e4m3fn experts, got torch.float32"):
        moe_fp8_gemv(x, weights, ids, w1.float(), None, s1, w2, None, s2, gate_up_group=64)
    with pytest.raises(ValueError, match="w2_scales \\(4, 2, 128\\): expected \\[E, K/128, N / rows\\]"):
        moe_fp8_gemv(x, weights, ids, w1, None, s1, w2, None, s2.repeat(1, 2, 1), gate_up_group=64)
    with pytest.raises(ValueError, match="activation = 'gelu': expected one of \\['swiglu_gpt_oss', 'silu'\\]"):
        moe_fp8_gemv(x, weights, ids, w1, None, s1, w2, None, s2, gate_up_group=64, activation="gelu")
    with pytest.raises(ValueError, match="Fp8GemvConfig.warps2 = 3: expected a power of two"):
        Fp8GemvConfig(warps2=3)


@pytest.mark.gpu
@pytest.mark.parametrize("num_tokens", [1, 2, 4])
def test_gemv_on_qwen3_sized_experts_agrees_with_the_tensor_core_gemms(monkeypatch, num_tokens):
    """Qwen3-30B-A3B's expert sizes (16 of its 128 experts), bf16 activations: the GEMV and the tensor-core path
    (`fp8_gemv_max_tokens` 0) within bf16 rounding of each other, the GEMV within it of the reference."""
    g = torch.Generator().manual_seed(num_tokens)
    w1, s1, w2, s2 = _fp8_experts(16, 2048, 768, g, (64, 128))
    x = torch.randn(num_tokens, 2048, generator=g).to(DEVICE, torch.bfloat16)
    weights, ids = _routing(num_tokens, 16, 8, g)
    kw = dict(w1_scales=s1, w2_scales=s2, gate_up_group=64, activation="silu")
    monkeypatch.setattr(fused_moe_module, "fp8_gemv_max_tokens", lambda device: 4)
    gemv = fused_moe(x, weights.to(torch.bfloat16), ids, w1, None, w2, None, **kw).float()
    monkeypatch.setattr(fused_moe_module, "fp8_gemv_max_tokens", lambda device: 0)
    tensor_cores = fused_moe(x, weights.to(torch.bfloat16), ids, w1, None, w2, None, **kw).float()
    want = fused_moe_ref(x.float(), weights, ids.long(), w1, None, w2, None, fp8_activations=True, **kw)
    # bf16 rows of inter, quantized again: an FP8 step of one value here and there against the float32 reference
    assert (tensor_cores - want).norm() / want.norm() < 2e-2
    assert (gemv - want).norm() / want.norm() < 2e-2
    assert (gemv - tensor_cores).norm() / want.norm() < 2e-2

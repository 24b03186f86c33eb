"""`fp8_block_gemv` (the FP8 dense product of a few tokens on CUDA cores; Triton's interpreter on CPU) against the
float64 definition written in test_fp8_gemm.py from the format (activations x_q * x_scales per 128 columns, weights
w * w_scale_inv per (bn, 128) block), and `fp8_block_linear`'s choice of it.

The GEMV's float32 sums differ from the definition only in order (tolerances: test_fp8_gemm.py's docstring, the
interpreter's 1e-5 of the products' magnitudes; on the GPU the GEMV multiplies in float32 too, so the same bound
holds there), far below what a scale of the wrong group or block row, a lost part of K or a bias added twice gives."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels import fp8_gemm
from quickmoe.kernels.fp8_gemm import Fp8GemmConfig, fp8_block_linear
from quickmoe.kernels.fp8_gemv import Fp8DenseGemvConfig, fp8_block_gemv, fp8_block_gemv_ref, gemv_supports
from quickmoe.kernels.tickets import ticket_counters
from tests.kernels.test_fp8_gemm import _assert_close, _definition, _operands

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
REL = 1e-5  # float32 summation of exact products, in any order (module docstring)


@pytest.mark.parametrize("m,n,k,bn,config,bias", [
    (1, 256, 512, 128, Fp8DenseGemvConfig(), False),  # the default launch: 2 rows, 4 groups a step, one step
    (3, 200, 384, 64, Fp8DenseGemvConfig(rows=16, groups=4, split_k=1), True),  # ragged N; 3 groups taken 1 a step
    (2, 136, 1024, 8, Fp8DenseGemvConfig(rows=16, groups=2, split_k=2), True),  # a scale row every 8 weight rows
    (2, 48, 768, 128, Fp8DenseGemvConfig(rows=4, groups=2, split_k=3), True),  # 6 groups in 3 parts of 2
    (1, 64, 640, 32, Fp8DenseGemvConfig(rows=8, groups=8, split_k=4), False),  # 5 groups: split 4 -> 1 part
])
def test_gemv_matches_the_definition(m, n, k, bn, config, bias):
    x_q, x_s, w, w_s, b = _operands(m, n, k, bn, seed=m * 100 + n + k + bn, bias=bias)
    want, magnitude = _definition(x_q, x_s, w, w_s, bn, b)
    got = fp8_block_gemv(x_q, x_s, w, w_s, (bn, 128), b, out_dtype=torch.float32, config=config)
    _assert_close(got, want, magnitude, torch.float32, rel=REL)
    assert not ticket_counters(got.device, "fp8_gemv").any()  # the pieces' counters back at zero
    again = fp8_block_gemv(x_q, x_s, w, w_s, (bn, 128), b, out_dtype=torch.float32, config=config)
    assert torch.equal(got, again)
    got_bf16 = fp8_block_gemv(x_q, x_s, w, w_s, (bn, 128), b, config=config)
    assert got_bf16.dtype == torch.bfloat16
    _assert_close(got_bf16, want, magnitude, torch.bfloat16, rel=REL)
    ref = fp8_block_gemv_ref(x_q, x_s, w, w_s, (bn, 128), b, out_dtype=torch.float32)
    _assert_close(ref, want, magnitude, torch.float32, rel=REL)


def test_a_tokens_row_does_not_depend_on_the_others():
    """Each program reads one token: row 2 of a 5-token call has the bits of the same token alone."""
    x_q, x_s, w, w_s, b = _operands(5, 160, 768, 128, seed=11, bias=True)
    config = Fp8DenseGemvConfig(rows=8, groups=2, split_k=2)
    together = fp8_block_gemv(x_q, x_s, w, w_s, (128, 128), b, config=config)
    alone = fp8_block_gemv(x_q[2:3], x_s[2:3], w, w_s, (128, 128), b, config=config)
    assert torch.equal(together[2:3], alone)


@pytest.mark.parametrize("m,k,bound,gemv", [(1, 512, 1, True), (2, 512, 1, False), (8, 512, 8, True),
                                            (9, 512, 8, False), (2, 300, 8, False), (1, 512, 0, False)])
def test_fp8_block_linear_runs_few_tokens_on_the_gemv(monkeypatch, m, k, bound, gemv):
    """Without a config, up to `fp8_gemv_max_tokens` tokens with whole 128-column groups go to the GEMV, the rest
    to the tensor-core kernel; both give the definition's result."""
    from quickmoe.kernels import fp8_gemv as gemv_module

    calls = []
    real = gemv_module.fp8_block_gemv
    monkeypatch.setattr(gemv_module, "fp8_block_gemv", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    monkeypatch.setattr(fp8_gemm, "fp8_gemv_max_tokens", lambda device: bound)
    x_q, x_s, w, w_s, b = _operands(m, 64, k, 128, seed=m + k, bias=True)
    want, magnitude = _definition(x_q, x_s, w, w_s, 128, b)
    got = fp8_block_linear(x_q, x_s, w, w_s, (128, 128), b, out_dtype=torch.float32)
    _assert_close(got, want, magnitude, torch.float32)
    assert bool(calls) == gemv
    calls.clear()
    fp8_block_linear(x_q, x_s, w, w_s, (128, 128), b, config=Fp8GemmConfig(16, 64, swap_ab=True))
    assert not calls  # an explicit tensor-core config is kept


def test_the_environment_sets_the_bound(monkeypatch):
    fp8_gemm.fp8_gemv_max_tokens.cache_clear()
    try:
        monkeypatch.setenv("QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS", "3")
        assert fp8_gemm.fp8_gemv_max_tokens(torch.device("cpu")) == 3
        fp8_gemm.fp8_gemv_max_tokens.cache_clear()
        monkeypatch.setenv("QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS", "many")
        with pytest.raises(ValueError, match="QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS = 'many'"):
            fp8_gemm.fp8_gemv_max_tokens(torch.device("cpu"))
        fp8_gemm.fp8_gemv_max_tokens.cache_clear()
        monkeypatch.delenv("QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS")
        assert fp8_gemm.fp8_gemv_max_tokens(torch.device("cpu")) == fp8_gemm.FP8_GEMV_MAX_TOKENS
    finally:
        fp8_gemm.fp8_gemv_max_tokens.cache_clear()


def test_bad_inputs_are_named():
    x_q, x_s, w, w_s, _ = _operands(2, 64, 300, 128, seed=3)
    assert not gemv_supports(300, (128, 128)) and gemv_supports(256, (128, 128))
    with pytest.raises(ValueError, match="K = 300"):
        fp8_block_gemv(x_q, x_s, w, w_s, (128, 128))
    with pytest.raises(ValueError, match="rows = 6"):
        Fp8DenseGemvConfig(rows=6)
    with pytest.raises(ValueError, match="split_k = 0"):
        Fp8DenseGemvConfig(split_k=0)
    x_q, x_s, w, w_s, _ = _operands(2, 64, 256, 128, seed=4)
    with pytest.raises(ValueError, match="x_scales"):
        fp8_block_gemv(x_q, x_s[:, :1], w, w_s, (128, 128))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("n,k", [(5120, 2048), (2048, 4096)])
def test_qwen3_shapes_on_the_gpu(n, k):
    """Qwen3-30B-A3B's qkv_proj and o_proj at 1-8 tokens: the GEMV's default launch against the definition, and
    within the tensor cores' bound of the tensor-core kernel."""
    x_q, x_s, w, w_s, b = _operands(8, n, k, 128, seed=n + k, bias=True)
    want, magnitude = _definition(x_q, x_s, w, w_s, 128, b)
    for m in (1, 3, 8):
        got = fp8_block_gemv(x_q[:m], x_s[:m], w, w_s, (128, 128), b, out_dtype=torch.float32)
        _assert_close(got, want[:m], magnitude[:m], torch.float32, rel=REL)

"""The fused glue kernels (Triton; the interpreter on CPU) against their torch references and against
independent definitions: RMSNorm with and without the residual add, per q and k head, RoPE fused with the paged
KV write."""

from __future__ import annotations

import math

import pytest
import torch

from quickmoe.kernels.moe_gemm import moe_combine
from quickmoe.kernels.rms_norm import (combine_ref, fused_add_rms_norm, fused_add_rms_norm_fp8,
                                      fused_add_rms_norm_fp8_ref, fused_add_rms_norm_ref, qk_rms_norm, qk_rms_norm_ref,
                                      rms_norm, rms_norm_ref)
from quickmoe.kernels.rotary_kv_write import rotary_write_kv, rotary_write_kv_ref, split_qkv

pytest.importorskip("triton")
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("hidden", [64, 90])
def test_rms_norm_kernels_match_the_definition(hidden):
    g = torch.Generator().manual_seed(hidden)
    x = torch.randn(7, hidden, generator=g).to(DEVICE)
    residual = torch.randn(7, hidden, generator=g).to(DEVICE)
    w = (torch.rand(hidden, generator=g) + 0.5).to(DEVICE)
    summed = (x.double() + residual.double())
    want = w.double() * summed / torch.sqrt(summed.pow(2).mean(-1, keepdim=True) + 1e-5)  # float64 definition
    out, got_sum = fused_add_rms_norm(x, residual, w, 1e-5)
    ref_out, ref_sum = fused_add_rms_norm_ref(x, residual, w, 1e-5)
    assert torch.allclose(got_sum, ref_sum) and torch.allclose(out, ref_out, atol=1e-5, rtol=1e-5)
    assert torch.allclose(out.double(), want, atol=1e-5, rtol=1e-5)
    plain = rms_norm(x, w, 1e-5)
    assert torch.allclose(plain, rms_norm_ref(x, w, 1e-5), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(plain, out)  # the residual changes the result


@pytest.mark.parametrize("num_heads,num_kv_heads,head_dim", [(4, 2, 32), (5, 2, 24), (32, 4, 128)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_qk_rms_norm_normalises_each_q_and_k_head_and_keeps_v(num_heads, num_kv_heads, head_dim, dtype):
    """Against a float64 definition written here, head by head (q heads by q_weight, k heads by k_weight), and
    the torch reference; the v heads come out as they went in (5 + 2 + 2 = 9 heads and 24 columns: both padded)."""
    g = torch.Generator().manual_seed(num_heads * head_dim)
    t, d = 3, head_dim
    qkv = (torch.randn(t, (num_heads + 2 * num_kv_heads) * d, generator=g) *
           torch.exp(torch.randn(t, num_heads + 2 * num_kv_heads, generator=g)).repeat_interleave(d, 1))
    qkv = qkv.to(dtype).to(DEVICE)
    q_w, k_w = ((torch.rand(d, generator=g) + 0.5).to(DEVICE) for _ in range(2))
    got = qk_rms_norm(qkv, q_w, k_w, num_heads, num_kv_heads, 1e-6)
    heads = qkv.double().view(t, -1, d)
    want = heads.clone()
    for h in range(num_heads + num_kv_heads):
        w = (q_w if h < num_heads else k_w).double()
        want[:, h] = w * heads[:, h] / torch.sqrt(heads[:, h].pow(2).mean(-1, keepdim=True) + 1e-6)
    want = want.view(t, -1)
    tol = 1e-5 if dtype == torch.float32 else 2.0 ** -7
    assert torch.allclose(got.double(), want, atol=tol, rtol=tol)
    assert torch.allclose(qk_rms_norm_ref(qkv, q_w, k_w, num_heads, num_kv_heads, 1e-6).double(), want, atol=tol,
                          rtol=tol)
    v = slice((num_heads + num_kv_heads) * d, None)
    assert torch.equal(got[:, v], qkv[:, v])


def test_fused_add_rms_norm_rounds_the_sum_to_the_activations_dtype():
    """float16 activations (exact in the interpreter): the residual stream is the float16 sum, and the norm is
    taken of that rounded sum, as the unfused `h = h + out; norm(h)`."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(5, 48, generator=g) * 30).half().to(DEVICE)
    residual = (torch.randn(5, 48, generator=g) * 30).half().to(DEVICE)
    w = torch.rand(48, generator=g).to(DEVICE)
    out, summed = fused_add_rms_norm(x, residual, w, 1e-6)
    assert summed.dtype == torch.float16 and torch.equal(summed, x + residual)
    ref = rms_norm_ref(x + residual, w, 1e-6)
    assert (out.float() - ref.float()).abs().max() <= 2e-3 * ref.float().abs().max()


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("top_k", [1, 4])
def test_fused_add_rms_norm_takes_an_moe_output_before_its_combine(top_k, dtype):
    """x [T, k, H] (an MoE's rows before the combine; float16 and float32, exact in the interpreter; float32 rows
    of magnitudes 1e-4 .. 1e4, whose float32 sum depends on its order): the same bits as `moe_combine`, then the
    fused add + norm (two launches), and as the torch reference; the combine itself against a float64 sum."""
    g = torch.Generator().manual_seed(top_k)
    tokens, hidden = 6, 80
    scale = 20.0 if dtype == torch.float16 else 10.0 ** torch.randint(-4, 5, (tokens, top_k, hidden), generator=g)
    parts = (torch.randn(tokens, top_k, hidden, generator=g) * scale).to(dtype).to(DEVICE)
    residual = (torch.randn(tokens, hidden, generator=g) * 20).to(dtype).to(DEVICE)
    w = (torch.rand(hidden, generator=g) + 0.5).to(DEVICE)
    out, summed = fused_add_rms_norm(parts, residual, w, 1e-6)
    assert out.shape == summed.shape == (tokens, hidden)
    combined = moe_combine(parts.reshape(tokens * top_k, hidden), top_k)  # [T, H]
    two_out, two_summed = fused_add_rms_norm(combined, residual, w, 1e-6)
    assert torch.equal(summed, two_summed) and torch.equal(out, two_out)
    ref_out, ref_summed = fused_add_rms_norm_ref(parts, residual, w, 1e-6)
    assert torch.equal(summed, ref_summed) and torch.equal(combine_ref(parts), combined)
    assert (out.float() - ref_out.float()).abs().max() <= 2e-3 * ref_out.float().abs().max()
    exact = parts.double().sum(1)  # [T, H]
    ulp = 2.0 ** -11 if dtype == torch.float16 else 2.0 ** -22
    assert ((combine_ref(parts).double() - exact).abs() <= parts.double().abs().sum(1) * ulp + 1e-3).all()


@pytest.mark.parametrize("hidden,top_k,dtype", [(256, 0, torch.bfloat16), (384, 0, torch.float32),
                                                 (384, 4, torch.bfloat16)])
def test_fused_add_rms_norm_fp8_gives_the_quantizers_bits_of_its_rows(hidden, top_k, dtype):
    """The norm's FP8 output (an FP8 layer's activations without the quantizer's launch) is exactly what the
    quantizer makes of the norm's own rows: e4m3 bits and scales per token and 128 columns; rows and sum are the
    plain fused norm's. 384 columns: a block of 512 with one masked group; top_k 4: an MoE output before its
    combine. Values spread over 2^-12 .. 2^12 so that groups take different scales, subnormals and ties."""
    from quickmoe.formats.fp8 import quantize_fp8_per_token_group

    g = torch.Generator().manual_seed(hidden + top_k)
    shape = (5, top_k, hidden) if top_k else (5, hidden)
    x = (torch.randn(shape, generator=g) * 2.0 ** torch.randint(-12, 12, shape, generator=g)).to(dtype).to(DEVICE)
    residual = torch.randn(5, hidden, generator=g).to(dtype).to(DEVICE)
    w = (torch.rand(hidden, generator=g) + 0.5).to(DEVICE)
    out, summed, q, scales = fused_add_rms_norm_fp8(x, residual, w, 1e-6)
    plain_out, plain_summed = fused_add_rms_norm(x, residual, w, 1e-6)
    assert torch.equal(out, plain_out) and torch.equal(summed, plain_summed)
    want_q, want_scales = quantize_fp8_per_token_group(out)
    assert q.dtype == torch.float8_e4m3fn and scales.shape == (5, hidden // 128)
    assert torch.equal(q.view(torch.uint8), want_q.view(torch.uint8)) and torch.equal(scales, want_scales)
    assert len(torch.unique(scales)) > 5  # the groups really differ
    ref = fused_add_rms_norm_fp8_ref(x, residual, w, 1e-6)  # the reference quantizes its own rows
    assert ((ref[3] - scales).abs() <= 2e-2 * scales.abs()).all()  # its rows: within a bf16 step or two
    assert torch.equal(ref[2].view(torch.uint8), quantize_fp8_per_token_group(ref[0])[0].view(torch.uint8))
    with pytest.raises(ValueError, match="FP8 output needs whole groups of 128 columns; hidden size 96"):
        fused_add_rms_norm_fp8(x[..., :96].contiguous(), residual[:, :96].contiguous(), w[:96], 1e-6)


def _rope_case(g, num_tokens=6, num_heads=4, num_kv=2, head_dim=16, num_blocks=5, block=4, dtype=torch.float32):
    qkv = torch.randn(num_tokens, (num_heads + 2 * num_kv) * head_dim, generator=g).to(dtype).to(DEVICE)
    positions = torch.randint(0, 40, (num_tokens,), generator=g).to(DEVICE)
    cos_sin = torch.randn(40, head_dim, generator=g).to(DEVICE)
    k_cache = torch.randn(num_blocks, block, num_kv, head_dim, generator=g).to(dtype).to(DEVICE)
    v_cache = torch.randn(num_blocks, block, num_kv, head_dim, generator=g).to(dtype).to(DEVICE)
    slots = torch.randperm(num_blocks * block, generator=g)[:num_tokens].to(DEVICE)
    slots[1] = -1  # a padding row: writes nothing
    return qkv, positions, cos_sin, k_cache, v_cache, slots


def test_rotary_write_kv_into_a_head_major_cache():
    """A head-major cache (a view of [blocks, KV, block, D]): the kernel writes the same values as into a slot-major
    one, at the addresses of the view (checked through the underlying tensor, head by head), and nothing else."""
    g = torch.Generator().manual_seed(14)
    qkv, positions, cos_sin, k_flat, v_flat, slots = _rope_case(g)
    base_k = k_flat.permute(0, 2, 1, 3).contiguous()  # [blocks, KV, block, D], the same values
    base_v = v_flat.permute(0, 2, 1, 3).contiguous()
    k_view, v_view = base_k.permute(0, 2, 1, 3), base_v.permute(0, 2, 1, 3)
    before_k = base_k.clone()
    q_slot = rotary_write_kv(qkv, positions, cos_sin, k_flat, v_flat, slots)  # the slot-major result
    q_head = rotary_write_kv(qkv, positions, cos_sin, k_view, v_view, slots)
    assert torch.equal(q_head, q_slot)
    assert torch.equal(k_view, k_flat) and torch.equal(v_view, v_flat)
    block = k_flat.shape[1]
    for slot in slots[slots >= 0].tolist():  # base[b, head, row] is the slot's head
        b, row = divmod(slot, block)
        assert torch.equal(base_k[b, :, row], k_flat[b, row]) and torch.equal(base_v[b, :, row], v_flat[b, row])
    written = torch.zeros(base_k.shape[0], base_k.shape[2], dtype=torch.bool, device=DEVICE)
    written[slots[slots >= 0] // block, slots[slots >= 0] % block] = True
    assert torch.equal(base_k.permute(0, 2, 1, 3)[~written], before_k.permute(0, 2, 1, 3)[~written])
    want_k, want_v = before_k.permute(0, 2, 1, 3).clone(), base_v.permute(0, 2, 1, 3).clone()
    rotary_write_kv_ref(qkv, positions, cos_sin, want_k, want_v, slots)  # the reference takes the view too
    assert torch.allclose(want_k, k_view, atol=1e-6)


def test_rotary_write_kv_matches_the_reference_and_the_definition():
    g = torch.Generator().manual_seed(4)
    qkv, positions, cos_sin, k_cache, v_cache, slots = _rope_case(g)
    q, k, v = split_qkv(qkv, 2, 16)  # [T, 4, 16], [T, 2, 16], [T, 2, 16]
    want_k, want_v = k_cache.clone(), v_cache.clone()
    want_q = rotary_write_kv_ref(qkv, positions, cos_sin, want_k, want_v, slots)
    got_q = rotary_write_kv(qkv, positions, cos_sin, k_cache, v_cache, slots)
    assert torch.equal(want_v.view(-1, 2, 16)[slots[0]], v[0])
    assert torch.allclose(got_q, want_q, atol=1e-6) and torch.allclose(k_cache, want_k, atol=1e-6)
    assert torch.equal(v_cache, want_v)
    # the definition, naively: pair i is (x[i], x[i + D/2]) rotated by the table's (cos, sin)
    t, h, i = 2, 3, 5
    c, s = cos_sin[positions[t], i].item(), cos_sin[positions[t], 8 + i].item()
    x1, x2 = q[t, h, i].item(), q[t, h, 8 + i].item()
    assert math.isclose(got_q[t, h, i].item(), x1 * c - x2 * s, rel_tol=1e-5, abs_tol=1e-6)
    assert math.isclose(got_q[t, h, 8 + i].item(), x2 * c + x1 * s, rel_tol=1e-5, abs_tol=1e-6)
    flat_k = k_cache.view(-1, 2, 16)
    slot = slots[0].item()
    c0, s0 = cos_sin[positions[0], :8], cos_sin[positions[0], 8:]
    assert torch.allclose(flat_k[slot, :, :8], k[0, :, :8] * c0 - k[0, :, 8:] * s0, atol=1e-6)
    untouched = torch.ones(flat_k.shape[0], dtype=torch.bool, device=DEVICE)
    untouched[slots[slots >= 0]] = False
    g2 = torch.Generator().manual_seed(4)
    _, _, _, fresh_k, _, _ = _rope_case(g2)
    assert torch.equal(flat_k[untouched], fresh_k.view(-1, 2, 16)[untouched])  # nothing else written

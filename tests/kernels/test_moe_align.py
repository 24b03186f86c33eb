"""moe_align_ref against a naive loop: every assignment once, in its expert's tiles, in order; tiles of one
expert each; sentinels only as padding; experts with no tokens get no tile."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels.moe_align import alignment_capacity, moe_align_ref


@pytest.mark.parametrize("num_tokens,top_k,num_experts,block_m", [(1, 4, 32, 16), (7, 1, 8, 4), (33, 4, 8, 16),
                                                                  (300, 4, 128, 64), (5, 2, 3, 1)])
def test_alignment_matches_a_naive_loop(num_tokens, top_k, num_experts, block_m):
    g = torch.Generator().manual_seed(num_tokens + num_experts)
    scores = torch.rand(num_tokens, num_experts, generator=g)
    topk_ids = torch.topk(scores, top_k, dim=-1).indices.to(torch.int32)  # distinct experts per token
    al = moe_align_ref(topk_ids, num_experts, block_m)
    num_assign = num_tokens * top_k
    flat = topk_ids.reshape(-1).tolist()
    want, want_experts = [], []  # the naive layout: per expert, its assignments then sentinels
    for e in range(num_experts):
        run = [a for a in range(num_assign) if flat[a] == e]
        if not run:
            continue
        tiles = -(-len(run) // block_m)
        want += run + [num_assign] * (tiles * block_m - len(run))
        want_experts += [e] * tiles
    assert al.sorted_ids.numel() == alignment_capacity(num_assign, num_experts, block_m) >= len(want)
    assert int(al.num_padded) == len(want)
    assert al.sorted_ids[:len(want)].tolist() == want
    assert set(al.sorted_ids[len(want):].tolist()) <= {num_assign}
    tiles = len(want) // block_m
    assert al.block_expert[:tiles].tolist() == want_experts
    assert set(al.block_expert[tiles:].tolist()) <= {-1}


def test_alignment_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"expected \[T, k\]"):
        moe_align_ref(torch.zeros(4, dtype=torch.int32), 4, 16)


@pytest.mark.parametrize("num_tokens,top_k,num_experts,block_m", [(1, 4, 32, 16), (7, 1, 8, 16), (33, 4, 8, 16),
                                                                  (64, 4, 128, 16), (13, 2, 5, 32), (40, 4, 40, 64),
                                                                  (1, 4, 128, 16),  # gpt-oss-120b decode at batch 1
                                                                  # several chunks: decode batches past 64
                                                                  (256, 4, 32, 64), (300, 4, 128, 16),
                                                                  (1024, 4, 32, 128), (77, 8, 200, 16),
                                                                  (1024, 4, 32, 16),  # > 256 tiles: two tile chunks
                                                                  (256, 4, 128, 64),  # gpt-oss-120b at batch 256
                                                                  (700, 4, 128, 32)])  # 3 sort chunks, the last ragged
@pytest.mark.parametrize("skew", [0.0, 4.0])
def test_single_program_kernel_matches_the_reference(num_tokens, top_k, num_experts, block_m, skew, monkeypatch):
    """skew > 0 biases every token towards the same few experts: long runs beside empty experts. The engine gives
    the program one sort chunk (SINGLE_PROGRAM_MAX); the kernel takes several, which the larger cases check."""
    pytest.importorskip("triton")
    from quickmoe.kernels import moe_align as moe_align_module
    from quickmoe.kernels.moe_align import moe_align

    monkeypatch.setattr(moe_align_module, "SINGLE_PROGRAM_MAX", 4096)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator().manual_seed(num_tokens * 3 + num_experts)
    bias = skew * torch.rand(num_experts, generator=g) ** 4  # [E] a few experts far ahead
    scores = torch.rand(num_tokens, num_experts, generator=g) + bias
    topk_ids = torch.topk(scores, top_k, -1).indices.to(torch.int32)  # [T, k] distinct experts per token
    got = moe_align(topk_ids.to(device), num_experts, block_m)
    want = moe_align_ref(topk_ids, num_experts, block_m)
    assert torch.equal(got.sorted_ids.cpu(), want.sorted_ids)
    assert torch.equal(got.block_expert.cpu(), want.block_expert)
    assert torch.equal(got.num_padded.cpu(), want.num_padded)


@pytest.mark.parametrize("num_tokens,top_k,num_experts,block_m,skew", [
    (1300, 4, 128, 128, 0.0),  # 6 chunks, the last ragged; gpt-oss-120b's experts and prefill tile
    (1100, 4, 32, 64, 4.0),  # 5 chunks: gpt-oss-20b just past the single program
    (700, 8, 60, 16, 0.0),  # top-8 over 60 experts (not a power of two): 6 chunks, many tiles
    (1025, 4, 8, 128, 4.0)])  # the last chunk holds 4 assignments
@pytest.mark.parametrize("plan_block", [None, 2])
def test_chunked_kernels_match_the_reference(num_tokens, top_k, num_experts, block_m, skew, plan_block, monkeypatch):
    """Prefill-sized A (> SINGLE_PROGRAM_MAX): the three launches over chunks give the reference's alignment;
    skew > 0 leaves experts with no assignment beside long runs across chunks. In the CPU's interpreter the chunks
    (and the single program's limit, and A) are 8 times smaller: the same chunk counts and ragged last chunks, in
    an eighth of the sorting (the GPU runs the shipped sizes). plan_block 2: the plan reads the chunks' histograms
    two at a time (3 blocks for 5-6 chunks, the last ragged), where the shipped block holds every chunk here."""
    pytest.importorskip("triton")
    from quickmoe.kernels import moe_align as moe_align_module

    if plan_block is not None:
        monkeypatch.setattr(moe_align_module, "_PLAN_CHUNK_BLOCK", plan_block)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        monkeypatch.setattr(moe_align_module, "SORT_CHUNK_MAX", moe_align_module.SORT_CHUNK_MAX // 8)
        monkeypatch.setattr(moe_align_module, "SINGLE_PROGRAM_MAX", moe_align_module.SINGLE_PROGRAM_MAX // 8)
        num_tokens = -(-num_tokens // 8)
    moe_align = moe_align_module.moe_align
    assert num_tokens * top_k > moe_align_module.SINGLE_PROGRAM_MAX
    g = torch.Generator().manual_seed(num_tokens * 5 + num_experts + int(skew))
    bias = skew * torch.rand(num_experts, generator=g) ** 4  # [E]
    scores = torch.rand(num_tokens, num_experts, generator=g) + bias
    topk_ids = torch.topk(scores, top_k, -1).indices.to(torch.int32)  # [T, k]
    got = moe_align(topk_ids.to(device), num_experts, block_m)
    want = moe_align_ref(topk_ids, num_experts, block_m)
    assert torch.equal(got.sorted_ids.cpu(), want.sorted_ids)
    assert torch.equal(got.block_expert.cpu(), want.block_expert)
    assert torch.equal(got.num_padded.cpu(), want.num_padded)


@pytest.mark.parametrize("num_tokens,top_k,num_experts,block_m,chunked", [
    (1, 4, 64, 16, False),  # gpt-oss-120b at 2 ranks, batch 1
    (256, 4, 64, 64, False),  # ... at batch 256
    (33, 2, 5, 16, False),
    (640, 4, 32, 16, False),  # one program over 3 chunks of 1,024 (absent ones counted apart: E_POW2 32)
    (200, 8, 128, 64, False),  # Qwen3-30B-A3B's 128 experts, a decode graph's padding
    (1100, 4, 16, 64, True),  # prefill-sized: the chunked launches (an eighth on the CPU, as above)
    (256, 8, 128, 16, True)])  # Qwen3-30B-A3B's decode bucket 256 with padding: past one chunk, chunked
def test_absent_last_leaves_those_assignments_to_no_tile(num_tokens, top_k, num_experts, block_m, chunked,
                                                         monkeypatch):
    """Expert parallel: ids equal to E (another rank's assignment) aligned as E + 1 experts with absent_last: the
    used rows hold every present assignment exactly once (and sentinels), every used tile's expert is below E,
    the kernels give the reference's alignment, and everything but `num_padded` is the plain alignment's."""
    pytest.importorskip("triton")
    from quickmoe.kernels import moe_align as moe_align_module

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if not chunked:  # (the one program over several chunks as well: the kernel takes them)
        monkeypatch.setattr(moe_align_module, "SINGLE_PROGRAM_MAX", 4096)
    if chunked and device == "cpu":
        monkeypatch.setattr(moe_align_module, "SORT_CHUNK_MAX", moe_align_module.SORT_CHUNK_MAX // 8)
        monkeypatch.setattr(moe_align_module, "SINGLE_PROGRAM_MAX", moe_align_module.SINGLE_PROGRAM_MAX // 8)
        num_tokens = -(-num_tokens // 8)
    assert (num_tokens * top_k > moe_align_module.SINGLE_PROGRAM_MAX) == chunked
    g = torch.Generator().manual_seed(num_tokens + 11 * num_experts)
    topk_ids = torch.topk(torch.rand(num_tokens, 2 * num_experts, generator=g), top_k, -1).indices  # [T, k]
    topk_ids = torch.where(topk_ids >= num_experts, num_experts, topk_ids).to(torch.int32)  # ~half absent
    topk_ids[0, 0] = num_experts  # at least one absent assignment
    absent = (topk_ids == num_experts).reshape(-1)  # [A]
    want = moe_align_module.moe_align_ref(topk_ids, num_experts + 1, block_m, absent_last=True)
    got = moe_align_module.moe_align(topk_ids.to(device), num_experts + 1, block_m, absent_last=True)
    plain = moe_align_module.moe_align_ref(topk_ids, num_experts + 1, block_m)
    for align in (want, got):
        assert torch.equal(align.sorted_ids.cpu(), plain.sorted_ids)
        assert torch.equal(align.block_expert.cpu(), plain.block_expert)
        used = int(align.num_padded.item())
        assert used % block_m == 0 and used < int(plain.num_padded.item())
        rows = align.sorted_ids[:used].cpu().long()
        real = rows[rows < absent.numel()]
        assert sorted(real.tolist()) == torch.nonzero(~absent).reshape(-1).tolist()  # each present one, once
        tiles = align.block_expert[:used // block_m].cpu()
        assert bool(((tiles >= 0) & (tiles < num_experts)).all())
    assert torch.equal(got.num_padded.cpu(), want.num_padded)

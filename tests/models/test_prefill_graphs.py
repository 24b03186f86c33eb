"""CUDA graphs of steps with prompt tokens (executor/prefill_graphs.py). On CPU the padded static-buffer path runs
eagerly (capture off): padding rows (no slot, in no sequence) and empty sequences change no logit, token or cache
entry of the real sequences. On the GPU: the captured step's logits against the eager step's, and greedy tokens
identical with the graphs on and off."""

from __future__ import annotations

import random

import pytest
import torch

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.executor.prefill_graphs import PrefillGraphs, prefill_seq_buckets, prefill_token_buckets
from quickmoe.executor.step_metadata import pad_block_tables
from quickmoe.llm import LLM

CKPT = dict(layers=2, experts=4, hidden_size=64, intermediate_size=64, num_experts_per_tok=2, sliding_window=16,
            seed=43)


def test_token_and_sequence_buckets():
    assert prefill_token_buckets(2048) == (64, 128, 256, 384, 512, 640, 768, 896, 1024, 1280, 1536, 1792, 2048)
    assert prefill_token_buckets(5000)[-6:] == (2048, 2560, 3072, 3584, 4096, 5000)
    assert prefill_token_buckets(100) == (64, 100)
    assert prefill_token_buckets(64) == (64,)
    assert prefill_seq_buckets(256) == (1, 4, 16, 64, 256) and prefill_seq_buckets(5) == (1, 4, 5)
    assert prefill_seq_buckets(1) == (1,) and prefill_seq_buckets(512) == (1, 4, 16, 64, 256, 512)


def _graphs(llm: LLM, max_tokens: int, max_seqs: int = 16) -> PrefillGraphs:
    """The padded path (capture off) with every bucket "captured" (warmed up), as an idle server leaves it."""
    graphs = PrefillGraphs(llm.runner, prefill_token_buckets(max_tokens), prefill_seq_buckets(max_seqs),
                           capture=False)
    captured = 0
    while graphs.capture_next_deferred():
        captured += 1
    assert captured == len(graphs.graphs) and not graphs.failed
    return graphs


def _step(llm: LLM, seed: int):
    """A prompt, a chunk after 20 cached positions and a decode row after 30, over blocks of their own. The cache
    is filled with random keys and values first: the chunk and the decode row read positions no step wrote, and a
    new cache's memory (torch.empty) may hold NaN."""
    gen = torch.Generator(device=llm.runner.device).manual_seed(seed)
    for t in llm.runner.kv_cache.keys + llm.runner.kv_cache.values:
        t.normal_(generator=gen)
    vocab = llm.config.vocab_size
    rng = random.Random(seed)
    token_ids = [[rng.randrange(vocab) for _ in range(37)], [rng.randrange(vocab) for _ in range(5)],
                 [rng.randrange(vocab)]]
    starts = [0, 20, 30]
    per_seq = [[0, 1, 2], [3, 4], [5, 6]]  # 16 positions a block
    return token_ids, starts, per_seq


@pytest.mark.parametrize("seed", [0, 1])
def test_a_padded_step_gives_the_eager_logits_and_takes_the_previous_samples(ckpt_factory, seed):
    """Bucket (64 tokens, 4 sequences) for 43 tokens over 3: its logits equal the eager step's; a sequence whose last
    token is the previous step's sample (prev_rows) reads it on the device."""
    llm = LLM(ckpt_factory(**CKPT), device="cpu", max_model_len=256)
    runner = llm.runner
    graphs = _graphs(llm, 128)
    token_ids, starts, per_seq = _step(llm, seed)
    groups = len(runner.kv_cache.plan.groups)
    tables = pad_block_tables([[blocks] * groups for blocks in per_seq], groups)
    want = runner.model(runner.build_batch(token_ids, starts, tables))  # [3, V]
    assert graphs.bucket(43, 3) == (64, 4)
    got = graphs.run(token_ids, starts, tables, [-1, -1, -1])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert graphs.replays[(64, 4)] == 1
    runner.prev_sampled[2] = token_ids[2][0]  # the decode row's token, sampled by the previous step
    placeholder = [token_ids[0], token_ids[1], [(token_ids[2][0] + 1) % llm.config.vocab_size]]
    again = graphs.run(placeholder, starts, tables, [-1, -1, 2])
    torch.testing.assert_close(again, want, atol=1e-5, rtol=1e-5)
    assert again.data_ptr() == graphs.logits.data_ptr()  # every bucket's logits: rows of the one shared buffer
    assert graphs.run(token_ids * 6, starts * 6, [t.repeat(6, 0) for t in tables], [-1] * 18) is None  # 18 > 16
    assert graphs.run([[1] * 200], [0], pad_block_tables([[list(range(13))] * groups], groups), [-1]) is None


@pytest.mark.parametrize("preset,kernels", [("gpt-oss", "torch"), ("gpt-oss", "triton"), ("qwen3", "torch")])
def test_padding_rows_go_to_no_expert_and_no_token_reads_them(ckpt_factory, monkeypatch, preset, kernels):
    """The MoE blocks route a padded step's padding rows to no expert (id E, weight 0) and only them; poisoned
    with NaN after every MoE block, those rows change no logit of the real sequences (no attention, cache write or
    projection of a token reads them). kernels "triton": the routing and MoE kernels (the interpreter on CPU)."""
    from quickmoe.layers.moe import FusedMoE

    if kernels == "triton":
        pytest.importorskip("triton")
    kw = dict(CKPT) if preset == "gpt-oss" else dict(preset="qwen3-moe-tiny", experts_dtype=None, layers=2,
                                                     experts=4, seed=43)
    # the Triton kernels run on the GPU where there is one (float32: the interpreter's numbers on CPU)
    on_gpu = kernels == "triton" and torch.cuda.is_available()
    device = dict(device="cuda", dtype="float32", kv_cache_memory=64 << 20, cuda_graphs="off") if on_gpu else \
        dict(device="cpu")
    llm = LLM(ckpt_factory(**kw), max_model_len=256, moe_kernels=kernels, **device)
    runner = llm.runner
    graphs = _graphs(llm, 128)
    token_ids, starts, per_seq = _step(llm, 4)
    groups = len(runner.kv_cache.plan.groups)
    tables = pad_block_tables([[blocks] * groups for blocks in per_seq], groups)
    want = runner.model(runner.build_batch(token_ids, starts, tables))  # [3, V]
    seen = []
    forward = FusedMoE.forward

    def poisoned(self, hidden, topk_weights, topk_ids, combine=True, hidden_fp8=None, padding_rows=False):
        out = forward(self, hidden, topk_weights, topk_ids, combine, hidden_fp8, padding_rows)
        seen.append((topk_weights.clone(), topk_ids.clone(), padding_rows, self.num_experts))
        rows = torch.arange(43, out.shape[0], device=out.device)
        return out.clone().index_fill_(0, rows, float("nan")) if padding_rows else out

    monkeypatch.setattr(FusedMoE, "forward", poisoned)
    got = graphs.run(token_ids, starts, tables, [-1, -1, -1])
    assert graphs.replays[(64, 4)] == 1
    assert len(seen) == sum(isinstance(m, FusedMoE) for m in runner.model.modules()) >= 1
    for weights, ids, padding_rows, num_experts in seen:
        assert padding_rows and ids.shape[0] == 64
        assert (ids[43:] == num_experts).all() and (weights[43:] == 0).all()
        assert (ids[:43] < num_experts).all() and (ids[:43] >= 0).all()
    assert torch.isfinite(got).all()
    # on the GPU the MoE tiles (and TF32 dots) follow the token count: 64 padded rows against 43 eager ones
    tol = 2e-3 if on_gpu else 1e-5
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)


def test_padded_prompt_steps_give_the_eager_tokens(ckpt_factory):
    """Whole prompts, prompts in chunks beside decode rows (mixed steps) and prefix-cache hits through the graphs:
    greedy tokens equal the eager engine's, and the graphs ran padded buckets of several sequences."""
    model_dir = ckpt_factory(**CKPT)
    rng = random.Random(5)
    shared = [rng.randrange(1000) for _ in range(40)]
    prompts = [[rng.randrange(1000) for _ in range(rng.randint(1, 90))] for _ in range(6)]
    prompts += [shared + [rng.randrange(1000) for _ in range(rng.randint(1, 20))] for _ in range(3)]
    params = [SamplingParams(max_tokens=rng.randint(2, 12), temperature=0, ignore_eos=True) for _ in prompts]
    options = dict(device="cpu", max_model_len=256, max_num_batched_tokens=64, long_prefill_token_threshold=48)
    want = [o.token_ids for o in LLM(model_dir, **options).generate(prompts, params)]
    llm = LLM(model_dir, **options)
    graphs = _graphs(llm, 64)
    llm.runner.prefill_graphs = graphs
    assert [o.token_ids for o in llm.generate(prompts, params)] == want
    assert sum(graphs.replays.values()) >= 3
    assert any(seqs > 1 for _, seqs in graphs.replays)


def test_an_idle_engine_captures_the_prompt_buckets_and_release_drops_them(ckpt_factory):
    """The engine's idle work captures every prompt bucket (sequence bucket 1 first, its token buckets largest
    first) after the decode graphs; `release_graphs` drops them and later steps run eagerly."""
    llm = LLM(ckpt_factory(**CKPT), device="cpu", max_model_len=256)
    graphs = PrefillGraphs(llm.runner, prefill_token_buckets(200), prefill_seq_buckets(4), capture=False)
    llm.runner.prefill_graphs = graphs
    assert graphs.deferred == [(200, 1), (128, 1), (64, 1), (200, 4), (128, 4), (64, 4)]
    pieces = llm.engine.finish_idle_work()
    assert pieces >= 6 and not graphs.deferred and len(graphs.graphs) == 6
    assert [(c["tokens"], c["seqs"]) for c in graphs.info["captures"]][:3] == [(200, 1), (128, 1), (64, 1)]
    llm.runner.release_graphs()
    assert llm.runner.prefill_graphs is None
    out = llm.generate([[3, 4, 5]], SamplingParams(max_tokens=2, temperature=0, ignore_eos=True))
    assert len(out[0].token_ids) == 2


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_captured_prompt_steps_give_the_eager_logits_and_tokens_on_cuda(ckpt_factory):
    """Captured graphs (bf16, Triton kernels): a padded step's logits against the eager step's (its MoE tiles may
    differ with the token count: close, not equal), and greedy tokens of a mixed workload with and without them."""
    model_dir = ckpt_factory(**CKPT)
    llm = LLM(model_dir, device="cuda", max_model_len=256, kv_cache_memory=256 << 20)
    runner = llm.runner
    graphs = runner.prefill_graphs
    assert graphs is not None and graphs.capture_enabled
    while runner.capture_deferred_graph():
        pass
    assert not graphs.failed and len(graphs.graphs) == len(graphs.info["captures"])
    token_ids, starts, per_seq = _step(llm, 3)
    groups = len(runner.kv_cache.plan.groups)
    tables = pad_block_tables([[blocks] * groups for blocks in per_seq], groups)
    want = runner.model(runner.build_batch(token_ids, starts, tables)).float()
    got = graphs.run(token_ids, starts, tables, [-1, -1, -1]).float()
    torch.testing.assert_close(got, want, atol=5e-2, rtol=5e-2)
    assert (got.argmax(-1) == want.argmax(-1)).all()
    rng = random.Random(8)
    prompts = [[rng.randrange(1000) for _ in range(rng.randint(1, 200))] for _ in range(10)]
    params = SamplingParams(max_tokens=8, temperature=0, ignore_eos=True)
    with_graphs = [o.token_ids for o in llm.generate(prompts, params)]
    assert sum(graphs.replays.values()) > 0 and sum(runner.graphs.replays.values()) > 0
    # the prompt graphs write their logits into the decode graphs' buffer (their replays take turns)
    assert graphs.logits.data_ptr() == runner.graphs.logits.data_ptr()
    eager = LLM(model_dir, device="cuda", max_model_len=256, kv_cache_memory=256 << 20, cuda_graphs_prefill_tokens=0)
    assert eager.runner.prefill_graphs is None
    without = [o.token_ids for o in eager.generate(prompts, params)]
    same = sum(a == b for x, y in zip(with_graphs, without) for a, b in zip(x, y))
    assert same >= 0.95 * sum(len(x) for x in without)

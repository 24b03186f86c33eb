"""Shared helpers: small random checkpoints written by quickmoe's own synthesis, and the transformers
reference loaded from the same files (MXFP4 dequantized, eager attention, eager experts)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

SMALL_VOCAB = 1024
# the engine tests' small gpt-oss (16-token sliding windows, so sliding groups release blocks), on CPU in float32
ENGINE_CKPT = dict(layers=2, experts=4, hidden_size=64, intermediate_size=64, num_experts_per_tok=2, sliding_window=16)
CPU_FLOAT32 = dict(device="cpu", dtype="float32", kv_cache_memory=1 << 30)
GREEDY = dict(temperature=0, ignore_eos=True)


def small_overrides(**kw) -> dict:
    """Overrides that keep tests fast: a small vocabulary with special ids inside it."""
    base = dict(vocab_size=SMALL_VOCAB, eos_token_id=SMALL_VOCAB - 2, pad_token_id=SMALL_VOCAB - 1)
    base.update(kw)
    return base


def write_small_checkpoint(out: Path, *, experts_dtype: str | None = "mxfp4", layers: int = 2, experts: int = 4,
                           seed: int = 0, preset: str = "tiny", dequantized_twin: bool = False, **overrides) -> Path:
    from quickmoe.checkpoint.synth import write_checkpoint

    return write_checkpoint(out, preset=preset, layers=layers, experts=experts, seed=seed,
                            experts_dtype=experts_dtype, overrides=small_overrides(**overrides), progress=False,
                            dequantized_twin=dequantized_twin)


def load_hf_reference(model_dir: Path, dtype: torch.dtype = torch.float32, device: str = "cpu"):
    """transformers' GptOssForCausalLM on the same files: the independent reference."""
    import json

    from transformers import GptOssForCausalLM, Mxfp4Config

    quantized = "quantization_config" in json.loads((model_dir / "config.json").read_text())
    kwargs = dict(quantization_config=Mxfp4Config(dequantize=True)) if quantized else {}
    if device != "cpu":  # load (and dequantize) straight onto the GPU; this path needs `accelerate`
        kwargs["device_map"] = device
    model = GptOssForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager",
                                              experts_implementation="eager", **kwargs)
    # transformers 5.17 (the GPU machine's) keeps dequantized MXFP4 experts in bf16 whatever `dtype`; the values
    # are exact in bf16 (E2M1 x 2^k), so casting them is exact too
    return model.to(dtype).eval()


def random_prompts(vocab: int, lengths: list[int], seed: int) -> list[list[int]]:
    """Fresh random token ids (below the two highest ids) of the given lengths."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab - 2, (n,), generator=g).tolist() for n in lengths]


def cpu_runner(model_dir):  # -> ModelRunner in float32 on the CPU
    from quickmoe.config import EngineConfig
    from quickmoe.executor.model_runner import ModelRunner

    return ModelRunner(model_dir, EngineConfig(model=str(model_dir), device="cpu", dtype="float32"))


def packed_logits(runner, prompts: list[list[int]]) -> list[torch.Tensor]:
    """One step over all prompts packed together (a fresh cache): every token's logits, [L, V] per prompt."""
    batch = PagedSteps(runner).batch(prompts, list(range(len(prompts))))
    logits = runner.forward(batch, all_logits=True)  # [T, V]
    return list(logits.split([len(p) for p in prompts]))


def assert_logits_match(name: str, ours: list[torch.Tensor], hf, prompts: list[list[int]]) -> None:
    """quickmoe's logits of each prompt (packed together) within 1e-4 of the reference model's, run alone."""
    for prompt, got in zip(prompts, ours):
        with torch.no_grad():
            want = hf(torch.tensor([prompt])).logits[0].float()  # [L, V]
        assert torch.isfinite(want).all() and want.std() > 1e-2  # a meaningful reference
        diff = (got - want).abs().max().item()
        assert diff <= 1e-4, f"{name}: prompt of {len(prompt)} tokens, max abs diff {diff:.3g}"


def assert_greedy_matches(name: str, llm, hf, prompts: list[list[int]], max_tokens: int = 32) -> None:
    """quickmoe's greedy tokens (all prompts batched through the engine) equal the reference's generate."""
    from quickmoe.engine.sampling_params import SamplingParams

    outs = llm.generate(prompts, SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True))
    for prompt, out in zip(prompts, outs):
        with torch.no_grad():
            ids = torch.tensor([prompt])  # attention_mask given: else transformers masks tokens equal to pad (0)
            ref = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_tokens,
                              min_new_tokens=max_tokens, do_sample=False, eos_token_id=None,
                              pad_token_id=0)[0, len(prompt):].tolist()
        assert out.token_ids == ref, f"{name}: prompt of {len(prompt)} tokens"


class PagedSteps:
    """Model steps over a runner's paged KV cache for tests: each sequence (any hashable id) gets blocks from
    its own block manager as it grows, as the scheduler would give them."""

    def __init__(self, runner) -> None:
        self.runner = runner
        from quickmoe.engine.block_manager import KVBlockManager

        self.blocks = KVBlockManager.for_plan(runner.kv_cache.plan)
        self.lengths: dict[int, int] = {}

    def batch(self, token_ids: list[list[int]], seq_ids: list[int]):
        starts = [self.lengths.get(s, 0) for s in seq_ids]
        for seq, toks, start in zip(seq_ids, token_ids, starts):
            self.blocks.allocate(seq, start, start + len(toks))
            self.lengths[seq] = start + len(toks)
        return self.runner.build_batch(token_ids, starts, self.blocks.step_block_tables(seq_ids))


@pytest.fixture(scope="session")
def ckpt_factory(tmp_path_factory):
    """Memoised checkpoint writer: the same arguments give the same directory within a session."""
    made: dict[tuple, Path] = {}

    def make(**kw) -> Path:
        key = tuple(sorted(kw.items(), key=lambda kv: kv[0]))
        key = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in key)
        if key not in made:
            made[key] = write_small_checkpoint(tmp_path_factory.mktemp("ckpt") / "model", **kw)
        return made[key]

    return make


@pytest.fixture(scope="module")
def engine_model_dir(ckpt_factory, request):
    """The module's ENGINE_CKPT checkpoint, seeded with its CKPT_SEED."""
    return ckpt_factory(**ENGINE_CKPT, seed=request.module.CKPT_SEED)

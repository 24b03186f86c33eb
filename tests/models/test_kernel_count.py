"""The kernels one decoder layer launches in a decode step, counted, so that the fused glue stays fused: with the
Triton kernels, a layer is two fused residual-add + RMSNorms, the QKV GEMM, decode attention with RoPE and the KV
write in one kernel (and the merge of its context splits on a full layer; a sliding layer's window is one split),
the output projection, the router with its top-k (one kernel), and the MoE's two GEMMs (its combine is summed by
the next layer's norm; the alignment of its assignments by expert takes no launch for one token,
`single_token_alignment`). On CPU the count is of Triton launches (the
interpreter) plus torch ops that would launch a kernel (not views or allocations); on the GPU it is of CUDA kernels
in a profiler trace."""

from __future__ import annotations

import collections
import contextlib

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from quickmoe.engine.block_manager import KVBlockManager
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.llm import LLM

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")
LAYER_KERNEL_BUDGET = 9  # measured 8 (layer 0 is a sliding layer: one split, no merge); cuBLAS may add a reduce
# Qwen3-MoE with FP8 projections and experts: 2 norms (each quantizing the activations of the FP8 layer after it),
# the GEMM of q, k and v together, attention (the q/k head norms inside it) and its merge (quantizing for o_proj),
# o_proj's GEMM, the router, the experts' second quantizer and 2 GEMMs; measured 10 (11 with o_proj's own quantizer;
# 12 with the head norms a launch of their own; 14 with the QKV GEMM and the experts quantizing their activations
# themselves; 21 when q, k and v were three quantizers and GEMMs, then concatenated, and the head norms two launches
# and a concatenation)
QWEN3_FP8_LAYER_KERNEL_BUDGET = 10


class _TorchOps(TorchDispatchMode):
    """Counts the torch ops that launch work (not views, not allocations), outside Triton launches (the
    interpreter moves its tensors with torch ops of its own)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()
        self.in_triton = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__
        if not self.in_triton and not func.is_view and not name.startswith(("empty", "new_empty", "lift_fresh",
                                                                            "detach", "alias")):
            self.ops[f"torch:{name}"] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _triton_launches(counter: collections.Counter, mode: _TorchOps):
    """Counts Triton kernel launches (compiled or interpreted) by kernel name."""
    import triton.runtime.interpreter as interpreter
    import triton.runtime.jit as jit

    patched = []
    for cls in (jit.JITFunction, interpreter.InterpretedFunction):
        original = cls.run

        def run(self, *args, _original=original, **kwargs):
            counter[f"triton:{getattr(self.fn, '__name__', self)}"] += 1
            mode.in_triton += 1
            try:
                return _original(self, *args, **kwargs)
            finally:
                mode.in_triton -= 1

        cls.run = run
        patched.append((cls, original))
    try:
        yield
    finally:
        for cls, original in patched:
            cls.run = original


def _decode_layer_call(llm):
    """(layer, args) of decoder layer 0 in a decode step of one sequence with a 20-token context."""
    runner = llm.runner
    blocks = KVBlockManager.for_plan(runner.kv_cache.plan)
    blocks.allocate(0, 0, 21)
    batch = runner.build_batch([[7]], [20], blocks.step_block_tables([0]))
    model = runner.model.model
    hidden = model.embed_tokens(batch.input_ids)
    k_cache, v_cache = runner.kv_cache.layer(0)
    # the 20 context positions were never written: random keys and values in the whole cache (uninitialised, it held
    # earlier tests' leftovers, inf among them; on the H200 the layer's MoE output once came out all zeros in both
    # runs of the same-bits test, whose equality then could not fail)
    generator = torch.Generator().manual_seed(53)
    for cache in (k_cache, v_cache):
        cache.copy_(torch.randn(cache.shape, generator=generator).to(cache.dtype))
    kv = batch.kv_groups[runner.kv_cache.layer_group[0]]
    return model.layers[0], (hidden, torch.zeros_like(hidden), model.rotary.cos_sin_cache, k_cache, v_cache, kv,
                             batch.attn)


@pytest.fixture(scope="module")
def kernel_llm(ckpt_factory):
    pytest.importorskip("triton")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model_dir = ckpt_factory(layers=2, experts=4, hidden_size=64, intermediate_size=64, num_experts_per_tok=2,
                             seed=51)
    llm = LLM(model_dir, device=device, dtype="float32", attention_kernels="triton", moe_kernels="triton",
              kv_cache_memory=1 << 26, max_model_len=128, cuda_graphs="off")
    llm.generate([[1, 2, 3]], SamplingParams(max_tokens=2, temperature=0))  # kernels compiled
    return llm


def _count_layer_launches(llm) -> collections.Counter[str]:
    return _run_layer_counting(llm)[0]


def _run_layer_counting(llm) -> tuple[collections.Counter[str], tuple]:
    """(the launches of decoder layer 0's decode step, its outputs)."""
    layer, args = _decode_layer_call(llm)
    counts: collections.Counter[str] = collections.Counter()
    with torch.inference_mode():
        if args[0].is_cuda:
            from torch.profiler import ProfilerActivity, profile

            layer(*args)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                outputs = layer(*args)
                torch.cuda.synchronize()
            for event in prof.events():
                if event.device_type == torch.autograd.DeviceType.CUDA:
                    counts[event.name[:60]] += 1
        else:
            mode = _TorchOps()
            with _triton_launches(counts, mode), mode:
                outputs = layer(*args)
            counts.update(mode.ops)
    return counts, outputs


def test_a_decode_step_of_one_layer_launches_few_kernels(kernel_llm):
    counts = _count_layer_launches(kernel_llm)
    total = sum(counts.values())
    assert total <= LAYER_KERNEL_BUDGET, f"{total} launches in one decoder layer: {dict(counts)}"
    assert total >= 8, dict(counts)  # the count sees the layer's work at all


@pytest.fixture(scope="module")
def qwen3_fp8_llm(ckpt_factory):
    """Qwen3-MoE with FP8 attention projections and experts (head_dim 128: q, k and v start on whole scale blocks,
    so they stack into one GEMM), the CUDA path of the FP8 layers forced on the CPU (the interpreter) while the
    module's tests run."""
    pytest.importorskip("triton")
    from quickmoe.layers.fp8_linear import Fp8BlockLinearMethod

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Fp8BlockLinearMethod, "uses_fp8_gemm", lambda self, x: True)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model_dir = ckpt_factory(preset="qwen3-moe-tiny", experts_dtype="fp8", layers=2, experts=4,
                                 hidden_size=128, head_dim=128, num_attention_heads=2, num_key_value_heads=1,
                                 moe_intermediate_size=128, intermediate_size=128, mlp_only_layers=[], seed=52)
        llm = LLM(model_dir, device=device, dtype="float32", attention_kernels="triton", moe_kernels="triton",
                  kv_cache_memory=1 << 26, max_model_len=128, cuda_graphs="off")
        llm.generate([[1, 2, 3]], SamplingParams(max_tokens=2, temperature=0))  # kernels compiled
        yield llm


def test_a_qwen3_fp8_decode_layer_launches_few_kernels(qwen3_fp8_llm):
    llm = qwen3_fp8_llm
    assert llm.runner.model.model.layers[0].self_attn.qkv_proj is not None
    counts = _count_layer_launches(llm)
    total = sum(counts.values())
    assert total <= QWEN3_FP8_LAYER_KERNEL_BUDGET, f"{total} launches in one decoder layer: {dict(counts)}"
    assert total >= 9, dict(counts)


def test_fp8_layers_take_their_activations_from_the_norms_with_the_same_bits(qwen3_fp8_llm, monkeypatch):
    """Each norm quantizes its rows for the FP8 layer after it (`RMSNorm.forward_fp8`: the QKV GEMM, the experts), and
    the decode attention its output for o_proj (`custom_ops.attention_fp8`): the layer's outputs are bit for bit those
    of the FP8 layers quantizing their inputs themselves, with three quantizer launches fewer."""
    from quickmoe.layers.attention import Attention
    from quickmoe.layers.linear import Linear
    from quickmoe.layers.moe import FusedMoE

    fused_counts, fused = _run_layer_counting(qwen3_fp8_llm)
    monkeypatch.setattr(FusedMoE, "takes_fp8_hidden", lambda self, hidden: False)
    monkeypatch.setattr(Attention, "takes_fp8_hidden", lambda self, hidden: False)
    monkeypatch.setattr(Linear, "takes_fp8_input", lambda self, x: False)
    plain_counts, plain = _run_layer_counting(qwen3_fp8_llm)
    assert all(torch.equal(a, b) for a, b in zip(fused, plain))
    hidden = _decode_layer_call(qwen3_fp8_llm)[1][0]
    assert all(torch.isfinite(t).all() for t in fused) and fused[0].abs().sum() > 0  # the experts computed
    assert not torch.allclose(fused[1], hidden)  # the residual took the attention's output
    def quantizers(counts):  # Triton launches on the CPU, profiler events on CUDA
        return sum(n for name, n in counts.items() if "_quantize_kernel" in name)

    assert quantizers(fused_counts) == quantizers(plain_counts) - 3, (dict(fused_counts), dict(plain_counts))

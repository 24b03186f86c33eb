"""One-off: the Qwen3 FP8 decode layer of test_kernel_count on CUDA, piece by piece (why its MoE output is zero)."""
import sys, tempfile
from pathlib import Path
import torch
sys.path.insert(0, "tests"); sys.path.insert(0, "tests/models")
from conftest import write_small_checkpoint
from quickmoe.engine.block_manager import KVBlockManager
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.layers.fp8_linear import Fp8BlockLinearMethod
from quickmoe.llm import LLM
from quickmoe.forward import custom_ops

Fp8BlockLinearMethod.uses_fp8_gemm = lambda self, x: True
d = Path(tempfile.mkdtemp()) / "model"
write_small_checkpoint(d, preset="qwen3-moe-tiny", experts_dtype="fp8", layers=2, experts=4, hidden_size=128,
                       head_dim=128, num_attention_heads=2, num_key_value_heads=1, moe_intermediate_size=128,
                       intermediate_size=128, mlp_only_layers=[], seed=52)
dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
llm = LLM(d, device=dev, dtype="float32", attention_kernels="triton", moe_kernels="triton",
          kv_cache_memory=1 << 26, max_model_len=128, cuda_graphs="off")
out = llm.generate([[1, 2, 3]], SamplingParams(max_tokens=8, temperature=0))
print("tokens", [o.token_ids if hasattr(o, "token_ids") else o for o in out])
runner = llm.runner
blocks = KVBlockManager.for_plan(runner.kv_cache.plan)
blocks.allocate(0, 0, 21)
batch = runner.build_batch([[7]], [20], blocks.step_block_tables([0]))
model = runner.model.model
hidden = model.embed_tokens(batch.input_ids)
k_cache, v_cache = runner.kv_cache.layer(0)
kv = batch.kv_groups[runner.kv_cache.layer_group[0]]
layer = model.layers[0]
def hook(name):
    def f(mod, inp, outp):
        outs = outp if isinstance(outp, tuple) else (outp,)
        for i, o in enumerate(outs):
            if isinstance(o, torch.Tensor):
                print(f"{name}[{i}] {tuple(o.shape)} {o.dtype} abs-sum {o.float().abs().sum().item():.4g} "
                      f"nan {o.float().isnan().any().item()}")
            elif isinstance(o, tuple):
                for j, t in enumerate(o):
                    print(f"{name}[{i}][{j}] {tuple(t.shape)} {t.dtype} abs-sum {t.float().abs().sum().item():.4g}")
    return f
for name, mod in layer.named_modules():
    mod.register_forward_hook(hook(name or "layer"))
with torch.inference_mode():
    outs = layer(hidden, torch.zeros_like(hidden), model.rotary.cos_sin_cache, k_cache, v_cache, kv, batch.attn)
    torch.cuda.synchronize() if dev == "cuda" else None
    mlp = layer.mlp
    x = torch.randn(1, hidden.shape[1], device=hidden.device)
    for kern in (True, False):
        w, ids = custom_ops.route_experts(x, mlp.gate.weight, None, mlp.top_k, True, mlp.renormalize, kern, None)
        print("route kernels", kern, w.tolist(), ids.tolist())
    mlp.experts.kernels = "triton"
    y = mlp(x, combine=False)
    print("mlp(x) triton combine=False", tuple(y.shape), y.abs().sum().item())
    y2 = mlp(x)
    print("mlp(x) triton combine=True", y2.abs().sum().item())
    mlp.kernels = "torch"; mlp.experts.kernels = "torch"
    y3 = mlp(x)
    print("mlp(x) torch", y3.abs().sum().item(), "max diff", (y3 - y2).abs().max().item())
    att = layer.self_attn
    print("o_proj weight", att.o_proj.weight.dtype, att.o_proj.weight.float().abs().sum().item(),
          "scale", getattr(att.o_proj, "weight_scale_inv", torch.zeros(1)).float().abs().sum().item())
    print("k_cache abs-sum", k_cache.float().abs().sum().item(), "v_cache", v_cache.float().abs().sum().item())

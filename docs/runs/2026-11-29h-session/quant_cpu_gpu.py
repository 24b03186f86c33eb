"""The torch FP8 activation quantizer reference (formats.fp8) on the CPU and on CUDA for the same bf16 input: where
do their e4m3 bits differ, and which is the nearest e4m3 value (ties to even) of x / scale computed in float64?"""
import torch
from quickmoe.formats.fp8 import quantize_fp8_per_token_group
from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group as kernel

g = torch.Generator().manual_seed(5120 + 2048)
x = (torch.randn(40, 2048, generator=g) * torch.exp(torch.randn(40, 1, generator=g))).to(torch.bfloat16)
q_cpu, s_cpu = quantize_fp8_per_token_group(x, 128)
q_gpu, s_gpu = quantize_fp8_per_token_group(x.cuda(), 128)
q_k, s_k = kernel(x.cuda(), 128)
print("scales equal cpu/gpu:", torch.equal(s_cpu, s_gpu.cpu()), "kernel/gpu:", torch.equal(s_k, s_gpu))
diff = (q_cpu.view(torch.uint8) != q_gpu.cpu().view(torch.uint8))
print("bits differing cpu/gpu:", int(diff.sum()), "of", diff.numel(), "; kernel/gpu:",
      int((q_k.view(torch.uint8) != q_gpu.view(torch.uint8)).sum()))
grid = torch.tensor(sorted({float(torch.tensor([b], dtype=torch.uint8).view(torch.float8_e4m3fn).float())
                            for b in range(256)} - {float("nan")}), dtype=torch.float64)
grid = grid[~torch.isnan(grid)]
for t, k in diff.nonzero()[:12].tolist():
    v = x[t, k].double() / s_cpu[t, k // 128].double()
    v32 = (x[t, k].float() / s_cpu[t, k // 128]).item()
    print(f"  [{t},{k}] x {x[t, k].item():.6g} scale {s_cpu[t, k // 128].item():.6g} x/scale f32 {v32!r} f64 {v.item()!r}"
          f" cpu {q_cpu[t, k].float().item()} gpu {q_gpu[t, k].float().item()}")

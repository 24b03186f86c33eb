"""Would test_stages_and_grid_order_change_no_bit's GPU contexts catch a group that mixed 2 and 4 warps? The same
inputs, w4s3k against w2s6k, bf16."""
import torch
from tests.kernels.test_attention_kernels import _paged_cache
from quickmoe.kernels.decode_attention import DecodeLaunchConfig, paged_decode_attention
g = torch.Generator().manual_seed(51)
contexts = [1, 17, 300, 600, 4200]
k, v, t = _paged_cache(contexts, 8, 64, torch.bfloat16, g)
q = torch.randn(len(contexts), 64, 64, generator=g).to(torch.bfloat16).cuda()
sinks = torch.randn(64, generator=g).cuda()
lens = torch.tensor(contexts, dtype=torch.int32, device="cuda")
for window, splits in ((0, 1), (0, 8), (128, 4)):
    a, b = (paged_decode_attention(q, k, v, t, lens, sinks, window, 0.125, num_splits=splits, config=c)
            for c in (DecodeLaunchConfig(64, 4, 3, True), DecodeLaunchConfig(64, 2, 6, True)))
    rows = [i for i in range(len(contexts)) if not torch.equal(a[i], b[i])]
    print(f"window {window} splits {splits}: w4s3k and w2s6k equal: {torch.equal(a, b)}; rows that differ: "
          f"{[contexts[i] for i in rows]}")

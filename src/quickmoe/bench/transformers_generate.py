"""transformers' `generate` on a checkpoint, for `quickmoe bench generate --baseline transformers`:
`python -m quickmoe.bench.transformers_generate DIR --prompts FILE --output-len N --batch-size B --json OUT`.

The model loads as the parity tests load it (MXFP4 dequantized; bf16 on CUDA, float32 on CPU; eager
attention), then generates greedily for the prompts (equal lengths, so batches need no padding), B at a time,
exactly N tokens each. Writes the wall time of the generation (loading excluded) and the token rates.
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--prompts", required=True, help="JSON list of token-id lists of equal length")
    parser.add_argument("--output-len", type=int, required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()

    import torch

    from quickmoe.bench.transformers_baseline import load_transformers_model

    prompts = json.loads(open(args.prompts).read())
    model = load_transformers_model(args.model, args.device).eval()

    def run(batch: list[list[int]], new_tokens: int) -> int:
        ids = torch.tensor(batch, device=args.device)
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
        return int(out.shape[0] * (out.shape[1] - ids.shape[1]))

    run(prompts[:1], 2)  # warm-up
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    generated = sum(run(prompts[i:i + args.batch_size], args.output_len)
                    for i in range(0, len(prompts), args.batch_size))
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    input_tokens = sum(len(p) for p in prompts)
    with open(args.json, "w") as f:
        json.dump({"engine": "transformers", "num_prompts": len(prompts), "batch_size": args.batch_size,
                   "seconds": seconds, "output_tokens": generated, "output_tokens_per_s": generated / seconds,
                   "total_tokens_per_s": (generated + input_tokens) / seconds}, f)


if __name__ == "__main__":
    main()

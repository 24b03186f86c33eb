"""transformers' cold start on the same checkpoint, timed the way quickmoe's StartupReport times it:
`python -m quickmoe.bench.transformers_baseline DIR --device cuda --json FILE`.

Phases: interpreter, imports (torch + transformers), from_pretrained (MXFP4 dequantized, bf16 on CUDA,
eager attention), first_token (one forward over a short prompt and its argmax).
"""

from __future__ import annotations

import argparse
import json
import time

from quickmoe import _IMPORT_PERF_COUNTER
from quickmoe.runtime.startup import _age_at_quickmoe_import


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    phases = {"interpreter": _age_at_quickmoe_import()}
    last = _IMPORT_PERF_COUNTER

    def mark(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        phases[name] = now - last
        last = now

    import torch
    from transformers import AutoModelForCausalLM, Mxfp4Config

    mark("imports")
    config = json.loads(open(f"{args.model}/config.json").read())
    kwargs = {"quantization_config": Mxfp4Config(dequantize=True)} if "quantization_config" in config else {}
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    if args.device != "cpu":
        kwargs["device_map"] = args.device
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype, attn_implementation="eager", **kwargs)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    mark("from_pretrained")
    with torch.no_grad():
        ids = torch.tensor([[13225, 2375]], device=args.device)  # "Hello world"
        model(ids).logits[0, -1].argmax().item()
    mark("first_token")
    total = sum(v for v in phases.values() if v is not None)
    with open(args.json, "w") as f:
        json.dump({"phases": phases, "total": total, "info": {"engine": "transformers"}}, f)


if __name__ == "__main__":
    main()

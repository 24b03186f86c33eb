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
from quickmoe.startup.report import _age_at_quickmoe_import


def load_transformers_model(model_dir: str, device: str):
    """transformers' model of a checkpoint as the baselines load it: MXFP4 experts dequantized, bf16 on CUDA
    (float32 on CPU), eager attention, placed on `device`."""
    import torch
    from transformers import AutoModelForCausalLM, Mxfp4Config

    config = json.loads(open(f"{model_dir}/config.json").read())
    kwargs = {"quantization_config": Mxfp4Config(dequantize=True)} if "quantization_config" in config else {}
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    if device != "cpu":
        kwargs["device_map"] = device
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager", **kwargs)


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
    import transformers  # noqa: F401  (the imports phase covers transformers too)

    mark("imports")
    model = load_transformers_model(args.model, args.device)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    mark("from_pretrained")
    with torch.no_grad():
        vocab = model.config.vocab_size  # "Hello world" in o200k; any ids for a small test vocabulary
        ids = torch.tensor([[13225 % vocab, 2375 % vocab]], device=args.device)
        model(ids).logits[0, -1].argmax().item()
    mark("first_token")
    total = sum(v for v in phases.values() if v is not None)
    with open(args.json, "w") as f:
        json.dump({"phases": phases, "total": total, "info": {"engine": "transformers"}}, f)


if __name__ == "__main__":
    main()

"""Which op first gives a prompt other bits in a batch than alone: the embedded model (or --model), one prompt
generated greedily alone and then as the first of a batch, eager, with every module's output recorded for that
prompt's rows at each step and compared bit for bit.

PYTHONPATH=src python3 scripts/probes/batch_invariance_probe.py [--device cuda] [--dtype bfloat16] [--batch 64]
    [--prompt-len 64] [--steps 6] [--decode-rule tree|h200-two-warps] [--json FILE]

`tests/models/test_quality_gpu.py` counts greedy tokens that agree between a prompt alone and in a batch of 64
(bench quality's "alone vs batch of 64"); when it falls under its bar it does not say where the bits part. This
probe runs the same engine options as that row (eager, whole prefill, no prefix cache), takes the test's prompts
(the held-out stream, 64 tokens each) and hooks every module of the model: at each engine step it keeps the rows of
the first prompt (prefill: its tokens, which lead the packed batch; decode: its row, the first) and, for modules whose
output has a row per sequence (the LM head), that sequence's row. The report lists, step by step, the first module in
call order whose rows differ and how many differ. `--decode-rule h200-two-warps` runs decode attention with the
H200's rule of 2026-11-29 (2 warps and 6 stages at a full layer's 9-512 programs) in place of the tree's, to compare
both in one process.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from quickmoe.bench.quality import CUDA_KV_CACHE_BYTES  # noqa: E402
from quickmoe.bench.quality_data import prompts as make_prompts  # noqa: E402
from quickmoe.bench.quality_data import read_heldout, token_stream  # noqa: E402
from quickmoe.bench.quality_paths import WHOLE_PREFILL  # noqa: E402
from quickmoe.checkpoint.default_model import embedded_model_dir  # noqa: E402
from quickmoe.engine.sampling_params import SamplingParams  # noqa: E402
from quickmoe.kernels import decode_attention  # noqa: E402
from quickmoe.kernels.decode_launch import DecodeLaunchConfig, decode_launch_config  # noqa: E402
from quickmoe.llm import LLM  # noqa: E402
from quickmoe.tokenizer import load_tokenizer  # noqa: E402


def two_warp_rule(batch: int, num_kv_heads: int, head_dim: int, window: int = 0,
                  device_name: str = "") -> DecodeLaunchConfig:
    """The H200 rule before 2026-11-30's sixteenth session: 2 warps and 6 stages at a full layer's 9-512 programs."""
    programs = batch * num_kv_heads
    if "H200" in device_name and window == 0 and head_dim <= 64 and 8 < programs <= 512:
        return DecodeLaunchConfig(64, 2, 6, True)
    return decode_launch_config(batch, num_kv_heads, head_dim, window, device_name)


class Recorder:
    """Forward hooks on every named module: per step, the (module, rows of the first prompt) in call order."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.steps: list[list[tuple[str, torch.Tensor | None]]] = []
        self.num_seqs = 1
        self.prompt_len = 0
        self._handles = [m.register_forward_hook(self._hook(name)) for name, m in model.named_modules() if name]
        self._handles.append(model.register_forward_pre_hook(self._new_step))

    def _new_step(self, module, args) -> None:
        self.steps.append([])

    def _hook(self, name: str):
        def hook(module, args, output) -> None:
            out = output[0] if isinstance(output, (tuple, list)) else output
            if not isinstance(out, torch.Tensor) or out.dim() == 0 or not self.steps:
                return
            self.steps[-1].append((name, self._rows(out)))
        return hook

    def _rows(self, out: torch.Tensor) -> torch.Tensor | None:
        """The first prompt's rows: its prompt_len tokens in the prefill step, its one row in a decode step
        (the packed batch leads with it), or its row of a per-sequence output."""
        rows = out.shape[0]
        if len(self.steps) == 1 and rows >= self.prompt_len and rows == self.prompt_len * self.num_seqs:
            return out[:self.prompt_len].detach().float().cpu()
        if len(self.steps) > 1 and rows == self.num_seqs:
            return out[:1].detach().float().cpu()
        if rows == self.num_seqs:  # per-sequence rows of the prefill step (the LM head's last positions)
            return out[:1].detach().float().cpu()
        return None  # rows this probe cannot attribute

    def close(self) -> None:
        for h in self._handles:
            h.remove()


def run(llm: LLM, prompts: list[list[int]], steps: int) -> tuple[list, list[int]]:
    model = llm.runner.model
    rec = Recorder(model)
    rec.num_seqs, rec.prompt_len = len(prompts), len(prompts[0])
    try:
        out = llm.generate(prompts, SamplingParams(max_tokens=steps, temperature=0, ignore_eos=True))
    finally:
        rec.close()
    return rec.steps, list(out[0].token_ids)


def compare(alone: list, batched: list) -> list[dict]:
    report = []
    for step, (a, b) in enumerate(zip(alone, batched)):
        names_a, names_b = [n for n, _ in a], [n for n, _ in b]
        if names_a != names_b:
            report.append({"step": step, "error": "modules called in another order"})
            continue
        first, differing, checked = None, 0, 0
        for (name, ta), (_, tb) in zip(a, b):
            if ta is None or tb is None or ta.shape != tb.shape:
                continue
            checked += 1
            if not torch.equal(ta, tb):
                differing += 1
                if first is None:
                    first = {"module": name, "max_abs": float((ta - tb).abs().max()),
                             "elements": int((ta != tb).sum()), "of": ta.numel()}
        report.append({"step": step, "modules_checked": checked, "modules_differing": differing, "first": first})
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(embedded_model_dir()))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--steps", type=int, default=6, help="tokens generated (the prefill step, then decode steps)")
    parser.add_argument("--target", type=int, default=0, help="which of the test's prompts is the one compared")
    parser.add_argument("--decode-rule", choices=("tree", "h200-two-warps"), default="tree")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.decode_rule == "h200-two-warps":
        decode_attention.decode_launch_config = two_warp_rule
    stream = token_stream(load_tokenizer(args.model), read_heldout(Path(args.model) / "heldout.jsonl"))
    prompts = make_prompts(stream, max(args.batch, args.target + 1), args.prompt_len)
    others = [p for i, p in enumerate(prompts[:args.batch]) if i != args.target]
    prompts = [prompts[args.target]] + others[:args.batch - 1]
    options = dict(device=args.device, dtype=args.dtype, cuda_graphs="off", compile="off",
                   max_num_batched_tokens=WHOLE_PREFILL, long_prefill_token_threshold=WHOLE_PREFILL,
                   enable_prefix_caching=False, max_num_seqs=args.batch,
                   max_model_len=args.prompt_len + args.steps + 16)
    if args.device == "cuda":
        options["kv_cache_memory"] = CUDA_KV_CACHE_BYTES
    llm = LLM(args.model, **options)
    llm.generate(prompts[:1], SamplingParams(max_tokens=2, temperature=0, ignore_eos=True))  # warm-up, as bench quality
    alone, tokens_alone = run(llm, prompts[:1], args.steps)
    batched, tokens_batched = run(llm, prompts, args.steps)
    report = compare(alone, batched)
    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"{device}, {args.dtype}, decode rule {args.decode_rule}: prompt {args.target} alone vs first of "
          f"{args.batch}; tokens {'equal' if tokens_alone == tokens_batched else 'DIFFER'} "
          f"({tokens_alone} / {tokens_batched})")
    for r in report:
        if "error" in r:
            print(f"step {r['step']}: {r['error']}")
            continue
        first = r["first"]
        where = "none" if first is None else (f"{first['module']} (max abs {first['max_abs']:.3g}, "
                                              f"{first['elements']} of {first['of']} values)")
        if first is not None and first["module"].endswith("embed_tokens"):  # other tokens: not the prompt's rows
            where += " - the rows taken are not the prompt's (the batch is not packed in request order)"
        print(f"step {r['step']}: {r['modules_differing']} of {r['modules_checked']} modules differ; first: {where}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "args": vars(args), "report": report,
                                               "tokens": [tokens_alone, tokens_batched]}, indent=1))


if __name__ == "__main__":
    main()

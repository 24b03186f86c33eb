"""Logits of a checkpoint on fixed prompts, with the model on one GPU or spread over several (tensor / expert
parallel), saved for comparison; and the comparison.

    python3 scripts/probes/tp_logits.py run DIR OUT.pt                                  # one GPU
    torchrun --nproc-per-node 2 scripts/probes/tp_logits.py run DIR OUT.pt [--ep]       # TP (or EP) over 2
    python3 scripts/probes/tp_logits.py compare A.pt B.pt                               # max |diff|, argmax agreement

Every rank builds its share with a ModelRunner (eager, no CUDA graphs) and computes the packed prompts' logits
of every token; rank 0 writes them (float32 [T, V]) with the start-up report (per-rank phases included).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch


def run(model: str, out: str, ep: bool, dtype: str, kernels: str) -> None:
    from quickmoe.config import EngineConfig
    from quickmoe.distributed import SINGLE
    from quickmoe.distributed.env import init_parallel, torchrun_rendezvous
    from quickmoe.engine.block_manager import KVBlockManager
    from quickmoe.executor.model_runner import ModelRunner, resolve_device

    rendezvous = torchrun_rendezvous()
    engine = EngineConfig(model=model, dtype=dtype, cuda_graphs="off", kv_cache_memory=1 << 30, moe_kernels=kernels,
                          tensor_parallel_size=rendezvous.world_size if rendezvous else 1, enable_expert_parallel=ep)
    parallel = SINGLE if rendezvous is None else init_parallel(rendezvous, device=resolve_device("auto"),
                                                                expert_parallel=ep)
    runner = ModelRunner(model, engine, parallel=parallel)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, runner.config.vocab_size - 1000, (n,), generator=g).tolist() for n in (7, 64, 300)]
    blocks = KVBlockManager.for_plan(runner.kv_cache.plan)
    for seq, p in enumerate(prompts):
        blocks.allocate(seq, 0, len(p))
    batch = runner.build_batch(prompts, [0] * len(prompts), blocks.step_block_tables(range(len(prompts))))
    logits = runner.forward(batch, all_logits=True).float().cpu()  # [T, V]
    if parallel.is_driver:
        torch.save({"logits": logits, "world_size": parallel.world_size, "expert_parallel": ep,
                    "report": runner.report.to_dict()}, out)
        print(json.dumps({"out": out, "world_size": parallel.world_size, "expert_parallel": ep,
                          "phases": runner.report.phases, "ranks": runner.report.info.get("ranks")}, default=str))
    if parallel.sharded:
        torch.distributed.destroy_process_group()


def compare(a: str, b: str) -> None:
    x, y = torch.load(a)["logits"], torch.load(b)["logits"]
    diff = (x - y).abs()
    agree = (x.argmax(-1) == y.argmax(-1)).float().mean().item()
    # the scale the differences are read against: the logits' spread per token, and how much of it the other run
    # keeps (correlation over the vocabulary, averaged over tokens)
    xc, yc = x - x.mean(-1, keepdim=True), y - y.mean(-1, keepdim=True)
    corr = ((xc * yc).sum(-1) / (xc.norm(dim=-1) * yc.norm(dim=-1))).mean().item()
    print(json.dumps({"a": a, "b": b, "max_abs_diff": diff.max().item(), "mean_abs_diff": diff.mean().item(),
                      "max_abs_logit": x.abs().max().item(), "logit_std": x.std(-1).mean().item(),
                      "correlation": corr, "argmax_agreement": agree}))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("model")
    r.add_argument("out")
    r.add_argument("--ep", action="store_true", help="expert parallel instead of splitting each expert")
    r.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    r.add_argument("--moe-kernels", default="auto", choices=("auto", "torch", "triton"),
                   help="triton on a CPU: with TRITON_INTERPRET=1 (tiny checkpoints)")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = p.parse_args(argv)
    if args.cmd == "run":
        run(args.model, args.out, args.ep, args.dtype, args.moe_kernels)
    else:
        compare(args.a, args.b)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

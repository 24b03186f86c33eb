#!/usr/bin/env python
"""Train quickmoe's embedded demo model: a small gpt-oss (MXFP4 experts, sinks, sliding and full layers) on the
Python standard library's source code, with a byte-level BPE tokenizer trained on the same files, and export it
with quickmoe's checkpoint writer into the package (src/quickmoe/checkpoint/embedded/).

    python scripts/train_demo_model.py                       # CPU, the shipped model's settings
    python scripts/train_demo_model.py --device cuda --out /tmp/demo   # on a GPU (bf16 autocast), a few minutes

Reproducible with --seed and --steps on one machine (--max-minutes stops early on the clock: then not). The
corpus rule, the held-out files, the hyper-parameters and the measured perplexities go into manifest.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "demo_model"))

import bpe  # noqa: E402
import corpus  # noqa: E402
from data import Batches, eval_windows, token_stream  # noqa: E402
from model import DemoGptOss  # noqa: E402

from quickmoe.checkpoint.synth import preset_config  # noqa: E402
from quickmoe.config import ModelConfig  # noqa: E402

logger = logging.getLogger("train_demo_model")
REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "src" / "quickmoe" / "checkpoint" / "embedded"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=1100)
    p.add_argument("--max-minutes", type=float, default=None, help="stop training after this long (then export)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--qat-fraction", type=float, default=0.15, help="last share of training with MXFP4 experts")
    p.add_argument("--aux-coef", type=float, default=0.01, help="load-balancing loss weight")
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--intermediate", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--window", type=int, default=128)
    p.add_argument("--bf16", action="store_true", help="bf16 autocast on the CPU too (always on CUDA)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--eval-tokens", type=int, default=65536)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--state", type=Path, default=Path("/tmp/quickmoe-demo-train.pt"),
                   help="the trained weights are saved here before export")
    p.add_argument("--export-only", action="store_true", help="export the weights saved in --state (no training)")
    return p.parse_args(argv)


def model_config(a: argparse.Namespace) -> dict:
    cfg = preset_config("tiny", layers=a.layers, experts=a.experts, hidden_size=a.hidden,
                        intermediate_size=a.intermediate, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                        head_dim=a.head_dim, num_experts_per_tok=a.top_k, vocab_size=a.vocab, eos_token_id=0,
                        pad_token_id=0, sliding_window=a.window, max_position_embeddings=4096,
                        initial_context_length=a.seq_len)
    cfg["quickmoe_embedded"] = {"name": "quickmoe-demo-stdlib", "trained_context": a.seq_len}
    return cfg


def lr_at(a: argparse.Namespace, step: int, progress: float) -> float:
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


@torch.no_grad()
def evaluate(model: DemoGptOss, windows: torch.Tensor, device: torch.device, autocast: bool) -> tuple[float, float]:
    """(perplexity, next-token accuracy) of the training model on windows [W, T]."""
    model.eval()
    nll, correct, count = 0.0, 0, 0
    for chunk in windows.split(8):
        ids = chunk.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            logits, _ = model(ids[:, :-1])
        nll += torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten(), reduction="sum").item()
        correct += (logits.argmax(-1) == ids[:, 1:]).sum().item()
        count += ids[:, 1:].numel()
    model.train()
    return math.exp(nll / count), correct / count


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    device = torch.device(a.device)
    autocast = device.type == "cuda" or a.bf16
    t_start = time.perf_counter()
    files = corpus.stdlib_files()
    train_files, held_files = corpus.split(files)
    tok = bpe.train_tokenizer(train_files, a.vocab)
    eos = tok.token_to_id(bpe.EOS)
    train_stream = token_stream(tok, train_files, eos)
    held_stream = token_stream(tok, held_files, eos)
    logger.info("corpus: %d training files (%d tokens), %d held out (%d tokens); tokenizer %.1f s",
                len(train_files), len(train_stream), len(held_files), len(held_stream), time.perf_counter() - t_start)
    cfg = model_config(a)
    model = DemoGptOss(ModelConfig.from_dict(cfg)).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.01)
    batches = Batches(train_stream, a.seq_len, a.batch_size, a.seed)
    windows = eval_windows(held_stream, a.seq_len + 1, a.eval_tokens)
    if a.export_only:
        saved = torch.load(a.state, weights_only=False)
        model.load_state_dict(saved["model"])
        return finish(a, cfg, model, tok, train_files, held_files, windows, device, autocast, saved["info"])
    t_train = time.perf_counter()
    limit_s = a.max_minutes * 60 if a.max_minutes else math.inf
    step, loss_avg = 0, None
    while step < a.steps:
        elapsed = time.perf_counter() - t_train
        if elapsed > limit_s:
            logger.info("stopping on the clock at step %d", step)
            break
        progress = max(step / a.steps, elapsed / limit_s)
        model.set_fake_quant(progress >= 1 - a.qat_fraction)
        for group in opt.param_groups:
            group["lr"] = lr_at(a, step, progress)
        ids = batches.next().to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            logits, aux = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        (loss + a.aux_coef * aux).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_avg = loss.item() if loss_avg is None else 0.98 * loss_avg + 0.02 * loss.item()
        step += 1
        if step % a.log_every == 0:
            logger.info("step %d loss %.3f aux %.3f lr %.2e %.1f tok/s%s", step, loss_avg, aux.item(),
                        opt.param_groups[0]["lr"], step * ids.numel() / (time.perf_counter() - t_train),
                        " (MXFP4 experts)" if model.layers[0].mlp.fake_quant else "")
    info = dict(steps=step, train_seconds=round(time.perf_counter() - t_train, 1), parameters=n_params,
                final_loss=round(loss_avg or 0, 4), train_tokens=len(train_stream), heldout_tokens=len(held_stream),
                device=str(device), torch=torch.__version__, python=sys.version.split()[0])
    torch.save({"model": model.state_dict(), "info": info}, a.state)
    return finish(a, cfg, model, tok, train_files, held_files, windows, device, autocast, info)


def finish(a, cfg, model, tok, train_files, held_files, windows, device, autocast, info) -> int:
    model.set_fake_quant(False)
    ppl_train, acc_train = evaluate(model, windows, device, autocast)
    model.set_fake_quant(True)
    ppl_train_q, acc_train_q = evaluate(model, windows, device, autocast)
    from export_demo import export  # the writer, tokenizer files, the manifest and quickmoe's own evaluation

    summary = export(a, cfg, model, tok, train_files, held_files, dict(
        info, training_model_ppl=round(ppl_train, 4), training_model_acc=round(acc_train, 4),
        training_model_mxfp4_ppl=round(ppl_train_q, 4), training_model_mxfp4_acc=round(acc_train_q, 4)))
    print("SUMMARY " + json.dumps(summary, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

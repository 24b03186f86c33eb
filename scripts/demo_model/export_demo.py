"""Export the trained demo model into the package: the MXFP4 checkpoint (quickmoe's writer, exact HF layout), its
tokenizer files, the held-out text and manifest.json; and measure, through quickmoe's own runner, the held-out
perplexity of the export and of its bf16-experts twin (the training weights rounded to bf16, written to a
temporary directory)."""

from __future__ import annotations

import copy
import json
import logging
import math
import tempfile
import time
from pathlib import Path

import bpe
import corpus

from quickmoe.bench.quality_data import HELDOUT_FILE, read_heldout, token_stream, windows
from quickmoe.bench.quality_ppl import evaluate_perplexity
from quickmoe.checkpoint.export import write_trained_checkpoint
from quickmoe.config import EngineConfig
from quickmoe.executor.model_runner import ModelRunner
from quickmoe.tokenizer import load_tokenizer

logger = logging.getLogger("train_demo_model")
# What CI re-measures (tests/models/test_embedded_model.py): the first EVAL_TOKENS of the held-out stream in
# windows of EVAL_WINDOW tokens, float32 on the CPU.
EVAL_WINDOW = 256
EVAL_TOKENS_CI = 8192


def _measure(model_dir: Path, device: str, max_tokens: int) -> dict:
    runner = ModelRunner(model_dir, EngineConfig(model=str(model_dir), device=device, dtype="float32",
                                                 kv_cache_memory=256 << 20))
    stream = token_stream(load_tokenizer(model_dir), read_heldout(model_dir / HELDOUT_FILE))
    result = evaluate_perplexity(runner, windows(stream, EVAL_WINDOW, max_tokens))
    return {"tokens": result.tokens, "perplexity": round(result.perplexity, 4), "nll": round(result.nll, 5),
            "accuracy": round(result.accuracy, 4)}


def export(a, cfg: dict, model, tok, train_files: list, held_files: list, info: dict) -> dict:
    out = Path(a.out)
    tensors = model.checkpoint_tensors()
    files = {"tokenizer.json": tok.to_str().encode(),
             "tokenizer_config.json": (json.dumps(bpe.tokenizer_config(), indent=2) + "\n").encode()}
    with tempfile.TemporaryDirectory() as tmp:
        held = Path(tmp) / HELDOUT_FILE
        corpus.write_heldout(held, held_files)
        files[HELDOUT_FILE] = held.read_bytes()
    manifest = {
        "name": "quickmoe-demo-stdlib",
        "what": "a small gpt-oss (MXFP4 experts, sinks, alternating sliding/full attention) trained on the Python "
                "standard library's source code; a code-completion toy, not a language model of any use beyond "
                "demos and correctness checks",
        "license_of_training_text": corpus.LICENSE,
        "corpus_rule": {"root": "sysconfig.get_paths()['stdlib']", "glob": "**/*.py",
                        "excluded_dirs": sorted(corpus.EXCLUDED_DIRS) + ["config-*"],
                        "max_file_bytes": corpus.MAX_FILE_BYTES,
                        "heldout": f"sha256(relative path)[0] % {corpus.HELDOUT_MODULUS} == 0"},
        "train_files": len(train_files), "train_corpus_sha256": corpus.corpus_hash(train_files),
        "heldout_files": [f.path for f in held_files], "heldout_sha256": corpus.corpus_hash(held_files),
        "training": {k: v for k, v in vars(a).items() if k not in ("out", "state")} | info,
        "uniform_perplexity": cfg["vocab_size"],
        "eval": {"window": EVAL_WINDOW, "ci_tokens": EVAL_TOKENS_CI, "dtype": "float32"},
    }
    manifest["training"] = json.loads(json.dumps(manifest["training"], default=str))
    files["manifest.json"] = (json.dumps(manifest, indent=2) + "\n").encode()
    write_trained_checkpoint(out, cfg, tensors, extra_files=files, overwrite=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        twin_cfg = copy.deepcopy(cfg)
        del twin_cfg["quantization_config"]
        twin = write_trained_checkpoint(Path(tmp) / "bf16", twin_cfg, tensors, extra_files=files)
        ppl_bf16 = _measure(twin, "cpu", a.eval_tokens)
    ppl_mxfp4 = _measure(out, "cpu", a.eval_tokens)
    ci = _measure(out, "cpu", EVAL_TOKENS_CI)
    manifest["heldout"] = {"bf16_experts": ppl_bf16, "mxfp4": ppl_mxfp4,
                           "mxfp4_vs_bf16": round(ppl_mxfp4["perplexity"] / ppl_bf16["perplexity"] - 1, 5),
                           "uniform": cfg["vocab_size"], "log_uniform_nats": round(math.log(cfg["vocab_size"]), 4)}
    manifest["ci"] = ci
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    logger.info("held-out perplexity (quickmoe, float32): MXFP4 %.3f, bf16 experts %.3f (%+.2f%%), uniform %d; "
                "measured in %.1f s", ppl_mxfp4["perplexity"], ppl_bf16["perplexity"],
                100 * manifest["heldout"]["mxfp4_vs_bf16"], cfg["vocab_size"], time.perf_counter() - t0)
    return {"out": str(out), "steps": info["steps"], "train_seconds": info["train_seconds"],
            "ppl_mxfp4": ppl_mxfp4["perplexity"], "ppl_bf16": ppl_bf16["perplexity"],
            "acc_mxfp4": ppl_mxfp4["accuracy"], "uniform": cfg["vocab_size"], "ci_ppl": ci["perplexity"]}

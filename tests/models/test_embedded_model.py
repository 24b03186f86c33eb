"""The embedded default model shipped in the package: it loads through quickmoe's loader, gives the held-out
perplexity recorded when it was exported (CI trains nothing), matches transformers on the same files, and its
tokenizer round-trips the held-out text."""

from __future__ import annotations

import json
import math
from fnmatch import fnmatch
from pathlib import Path

import pytest
import torch

from quickmoe.bench.quality_data import HELDOUT_FILE, read_heldout, token_stream, windows
from quickmoe.bench.quality_ppl import evaluate_perplexity
from quickmoe.checkpoint.default_model import embedded_model_dir, ensure_default_model
from quickmoe.tokenizer import HFTokenizer, load_tokenizer

from .conftest import cpu_runner, load_hf_reference, packed_logits

EMBEDDED = embedded_model_dir()
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads((EMBEDDED / "manifest.json").read_text())


@pytest.fixture(scope="module")
def runner():
    return cpu_runner(EMBEDDED)


def test_the_default_model_is_the_embedded_trained_model(manifest):
    assert ensure_default_model() == EMBEDDED
    config = json.loads((EMBEDDED / "config.json").read_text())
    assert config["architectures"] == ["GptOssForCausalLM"] and config["quantization_config"]["quant_method"] == "mxfp4"
    assert set(config["layer_types"]) == {"sliding_attention", "full_attention"}
    assert manifest["name"] == "quickmoe-demo-stdlib" and "PSF" in manifest["license_of_training_text"]


def test_the_package_data_carries_every_file_and_stays_small():
    tomllib = pytest.importorskip("tomllib")
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["quickmoe"]
    files = [p for p in EMBEDDED.iterdir() if p.is_file()]
    assert {"config.json", "tokenizer.json", "manifest.json", HELDOUT_FILE} <= {p.name for p in files}
    for p in files:
        rel = p.relative_to(REPO / "src" / "quickmoe").as_posix()
        assert any(fnmatch(rel, g) for g in globs), f"{rel} is not package data"
    assert sum(p.stat().st_size for p in files) <= 30e6


def test_shipped_weights_give_the_recorded_heldout_perplexity(runner, manifest):
    """The perplexity the export recorded (quickmoe, float32, the first ci_tokens of the held-out set) within 1%."""
    ev = manifest["eval"]
    stream = token_stream(load_tokenizer(EMBEDDED), read_heldout(EMBEDDED / HELDOUT_FILE))
    result = evaluate_perplexity(runner, windows(stream, ev["window"], ev["ci_tokens"]))
    recorded = manifest["ci"]["perplexity"]
    assert result.tokens == manifest["ci"]["tokens"]
    assert abs(result.perplexity / recorded - 1) <= 0.01, (result.perplexity, recorded)
    # far below uniform, and the MXFP4 export within 2% of the bf16 training weights (as recorded)
    assert result.perplexity < manifest["uniform_perplexity"] / 50
    assert math.log(result.perplexity) < 0.5 * math.log(manifest["uniform_perplexity"])
    assert abs(manifest["heldout"]["mxfp4_vs_bf16"]) <= 0.02


def test_tokenizer_round_trips_the_heldout_text():
    tok = load_tokenizer(EMBEDDED)
    assert isinstance(tok, HFTokenizer) and not tok.uses_harmony
    chars = tokens = 0
    for _, text in read_heldout(EMBEDDED / HELDOUT_FILE).texts:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        chars, tokens = chars + len(text), tokens + len(ids)
    assert chars / tokens > 3  # a BPE trained on the same kind of text: several characters a token


def test_embedded_model_matches_transformers(runner):
    hf = load_hf_reference(EMBEDDED)
    tok = load_tokenizer(EMBEDDED)
    prompt = tok.encode(read_heldout(EMBEDDED / HELDOUT_FILE).texts[0][1])[:300]  # past the 128-token window
    got = packed_logits(runner, [prompt])[0]
    with torch.no_grad():
        want = hf(torch.tensor([prompt])).logits[0].float()
    assert (got - want).abs().max().item() <= 1e-4
    assert (got.argmax(-1) == want.argmax(-1)).all()


def test_greedy_completion_is_python(runner):
    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    llm = LLM(None, device="cpu", max_num_seqs=4, kv_cache_memory=64 << 20)
    out = llm.generate("def fibonacci(n):", SamplingParams(max_tokens=48, temperature=0))[0]
    assert out.text.startswith("\n    ") and "return" in out.text, out.text  # an indented body that returns

"""The persistent Triton kernel cache (executor/kernel_cache.py): where it is, that the user's TRITON_CACHE_DIR wins,
that choosing it twice changes nothing, that start-up sets it (compile included) and counts what was compiled; on
the GPU, that a second process with the same cache compiles no kernel at start-up nor for its first token."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from quickmoe.executor.kernel_cache import cache_key, triton_cache_dir, use_triton_cache, versions

CPU = torch.device("cpu")


@pytest.fixture
def fresh_env(tmp_path, monkeypatch):
    """A quickmoe cache under tmp_path and no TRITON_CACHE_DIR (both restored after the test)."""
    monkeypatch.setenv("QUICKMOE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    return tmp_path / "cache"


def test_the_cache_is_under_the_quickmoe_cache_keyed_by_versions_and_device(fresh_env):
    cache = use_triton_cache(CPU)
    want = fresh_env / "triton" / cache_key({**versions(), "device": "cpu"})
    assert cache.path == want == triton_cache_dir(CPU) and want.is_dir()
    assert os.environ["TRITON_CACHE_DIR"] == str(want) and cache.source == "quickmoe" and cache.entries == 0
    assert set(versions()) == {"quickmoe", "torch", "triton"} and versions()["torch"] == torch.__version__
    assert cache_key({**versions(), "device": "NVIDIA H100 80GB HBM3"}) != want.name  # devices kept apart
    assert cache_key({**versions(), "torch": "0.0", "device": "cpu"}) != want.name  # versions too


def test_choosing_it_again_changes_nothing_and_counts_new_entries(fresh_env):
    first = use_triton_cache(CPU)
    (first.path / "0123abcd").mkdir()  # what Triton makes per compiled kernel
    second = use_triton_cache(CPU)  # its own earlier setting is not mistaken for the user's
    assert (second.path, second.source, second.entries) == (first.path, "quickmoe", 1)
    assert os.environ["TRITON_CACHE_DIR"] == str(first.path)
    assert first.record("startup") == 1 and first.info["new_entries_startup"] == 1
    assert second.new_entries() == 0


def test_the_users_triton_cache_dir_wins(fresh_env, tmp_path, monkeypatch):
    use_triton_cache(CPU)  # quickmoe's setting first: the user's later one must still win
    mine = tmp_path / "my-triton"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(mine))
    cache = use_triton_cache(CPU)
    assert (cache.path, cache.source) == (mine, "user") and os.environ["TRITON_CACHE_DIR"] == str(mine)
    assert cache.path != triton_cache_dir(CPU)


def test_start_up_sets_it_and_compile_keeps_it(fresh_env, ckpt_factory):
    """An LLM's start-up points TRITON_CACHE_DIR at the kernel cache and reports it; with --compile on, Inductor's
    Triton kernels go there too (its own caches under compile/)."""
    from quickmoe.llm import LLM

    if torch.cuda.is_available():  # (its GPU counterpart is the next test)
        pytest.skip("asserts the CPU's interpreter case: no kernel compiled at start-up")
    torch._dynamo.reset()
    llm = LLM(ckpt_factory(layers=2, seed=50), device="cpu", compile="on")
    info = llm.startup_report.info["triton_cache"]
    assert info["dir"] == str(triton_cache_dir(CPU)) == os.environ["TRITON_CACHE_DIR"]
    assert info["source"] == "quickmoe" and info["new_entries_startup"] == 0  # CPU: the interpreter compiles nothing
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"].startswith(str(fresh_env / "compile"))


@pytest.mark.gpu
def test_a_warm_kernel_cache_compiles_nothing_at_start_up_on_the_gpu(ckpt_factory, tmp_path):
    """Two fresh `quickmoe generate` processes (serving defaults: graphs on) sharing a new quickmoe cache: the first
    compiles kernels at start-up, the second none, neither at start-up nor for its first token."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    model_dir = ckpt_factory(layers=2, seed=51)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_CACHE_DIR"}
    env["QUICKMOE_CACHE_DIR"] = str(tmp_path / "cache")
    infos = []
    for run in range(2):  # the prompt's o200k ids (261, 287, 274) lie inside the small vocabulary (1024)
        out = tmp_path / f"report{run}.json"
        proc = subprocess.run([sys.executable, "-m", "quickmoe", "generate", str(model_dir), "--prompt",
                               " a b c", "--max-tokens", "4", "--temperature", "0", "--device", "cuda", "-q",
                               "--startup-json", str(out)], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, f"run {run} exited {proc.returncode}: {proc.stderr[-3000:]}"
        infos.append(json.loads(out.read_text())["info"]["triton_cache"])
    cold, warm = infos
    assert cold["dir"] == warm["dir"] and cold["dir"].startswith(str(tmp_path / "cache" / "triton"))
    assert cold["new_entries_startup"] > 0
    assert warm["new_entries_startup"] == 0 and warm["new_entries_first_token"] == 0

"""Two ranks on two GPUs (NCCL), as a user runs them: `quickmoe generate -tp 2` (CUDA graphs on, the default) and
with `--enable-expert-parallel` print the greedy tokens of one process in float32, and every process exits 0 within
the time allowed. The first run on two H200s printed its result and then hung in NCCL's teardown (the decode CUDA
graphs, which hold its collectives, were still alive; and rank 0 waited for the other rank's exit before leaving the
group): only a test on two GPUs sees either. Skipped without two CUDA devices."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from .test_processes import ENV

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                                 reason="needs two CUDA devices")]
EXIT_S = 300  # start-up (kernels compiled on a fresh cache) + 16 tokens + the exit


def _generate(*extra: str) -> list[list[int]]:
    from quickmoe.checkpoint.default_model import ensure_default_model

    model = str(ensure_default_model())
    proc = subprocess.run([sys.executable, "-m", "quickmoe", "generate", model, "-p", "def main():", "-p", "x = 1",
                           "--max-tokens", "16", "--temperature", "0", "--ignore-eos", "--json", "-q",
                           "--device", "cuda", "--dtype", "float32", *extra],
                          env=ENV, capture_output=True, text=True, timeout=EXIT_S, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line)["token_ids"] for line in proc.stdout.splitlines() if line.startswith("{")]


def test_two_gpus_give_one_gpus_tokens_and_exit():
    one = _generate()
    assert len(one) == 2 and all(len(t) == 16 for t in one)
    assert _generate("-tp", "2") == one
    assert _generate("-tp", "2", "--enable-expert-parallel") == one

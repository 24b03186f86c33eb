"""What the serving commands import before they answer: `quickmoe generate` nothing from bench/, the server
(fastapi, uvicorn, pydantic), transformers, hypothesis, the OpenAI client, Dynamo or Inductor (compile is off);
`--help` not even torch. Read from `python -X importtime` of fresh processes, as a user runs them (the serve side is
in tests/server/test_serve_process.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from quickmoe.checkpoint.default_model import ensure_default_model

# never needed before a first token (transformers and hypothesis are test and bench dependencies only)
NOT_FOR_SERVING = ("quickmoe.bench", "transformers", "hypothesis", "openai", "torch._dynamo", "torch._inductor")
SERVER_ONLY = ("quickmoe.server", "fastapi", "uvicorn", "starlette", "pydantic")


def imported(*args: str) -> set[str]:
    """Every module a fresh `python -X importtime -m quickmoe ARGS` process imported."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "quickmoe", *args], capture_output=True,
                            text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
            if line.startswith("import time:") and "self [us]" not in line}


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_generate_imports_only_what_serving_needs():
    modules = imported("generate", str(ensure_default_model()), "--prompt", "Hello", "--max-tokens", "2",
                       "--device", "cpu", "-q")
    assert "torch" in modules and "quickmoe.llm" in modules  # the probe sees the real imports
    assert loaded(modules, NOT_FOR_SERVING + SERVER_ONLY) == []


def test_help_imports_no_torch():
    for args in (["--help"], ["generate", "--help"], ["serve", "--help"]):
        modules = imported(*args)
        assert "quickmoe.cli" in modules and loaded(modules, ("torch", "numpy", "triton") + SERVER_ONLY) == [], args


def test_the_http_frontend_imports_no_torch():
    """The frontend process of `quickmoe serve` (server/engine_process.py) imports the server stack and unpickles
    the engine's batches (outputs, snapshot, step totals) without torch: it starts while the model loads, beside the
    engine's own import of torch."""
    code = """
import pickle, sys, time
from quickmoe.engine.outputs import StepOutput
from quickmoe.executor.step_totals import StepTotals
from quickmoe.server.engine_core import CoreBatch
from quickmoe.server.metrics import EngineSnapshot
batch = CoreBatch([StepOutput("r", [5], "x", None, False, None, None, 3, 1)], time.monotonic(),
                  EngineSnapshot(num_running=1, steps=StepTotals(steps={"decode": 1})))
data = pickle.dumps(batch)
for name in [m for m in sys.modules if m.startswith("quickmoe")]:
    del sys.modules[name]
import quickmoe.server.app, quickmoe.server.engine_process, quickmoe.server.serve
assert pickle.loads(data).snapshot.steps.steps == {"decode": 1}
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]"

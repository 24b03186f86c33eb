"""The server's step profile on the GPU, for real (engine/step_profile.py over executor/op_profile.py's trace, run by
the engine loop of server/engine_core.py, asked through AsyncEngine as POST /profile_steps asks): under load it
traces exactly the steps asked for, their kinds (by the step timer) add up to them, and the kernels fall in the
families a MoE model's step has. The loop's logic and the HTTP route are tested on the CPU
(tests/server/test_step_profile.py)."""

from __future__ import annotations

import asyncio
import random

import pytest
import torch

from quickmoe.checkpoint.default_model import ensure_tiny_random_model
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.llm import LLM
from quickmoe.server.async_engine import AsyncEngine

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_profile_under_load_traces_the_steps_asked_for():
    llm = LLM(ensure_tiny_random_model(), device="cuda", max_model_len=512, max_num_batched_tokens=256,
              max_num_seqs=16, kv_cache_memory=256 << 20)
    rng = random.Random()
    want = rng.randrange(4, 9)

    async def main():
        engine = AsyncEngine(llm.engine, max_waiting=16, time_steps=True)
        engine.start()
        streams = [engine.add_request(f"r{i}", [rng.randrange(1000, 30000) for _ in range(rng.randrange(60, 200))],
                                      SamplingParams(max_tokens=120, temperature=0, ignore_eos=True))
                   for i in range(12)]
        await streams[0].__anext__()
        doc = await engine.profile_steps(want, timeout_s=60)
        for stream in streams:
            async for _ in stream:
                pass
        await engine.shutdown()
        return doc

    doc = asyncio.run(main())
    assert "error" not in doc, doc
    assert doc["steps"] == want and sum(k["steps"] for k in doc["step_kinds"].values()) == want
    assert sum(doc["shares"].values()) == pytest.approx(1.0)
    assert sum(doc["ms_per_step"].values()) == pytest.approx(doc["gpu_ms_per_step"])
    assert doc["ms_per_step"]["moe"] > 0 and doc["ms_per_step"]["attention"] > 0 and doc["kernels_per_step"] > 10
    assert doc["top"] and doc["top"][0][1] >= doc["top"][-1][1]

"""Page-locked staging for a step's host->device copies (executor/pinned_staging.py). On the GPU: values arrive
intact while the device is still busy with earlier work, a buffer is not overwritten before the copies of the step
that last used it ran, arrays too large for the buffer still arrive and the buffer grows. On the CPU: the decode
graphs' static-buffer path fills every element of the arrays the staging memory hands it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.executor.cuda_graphs import DecodeGraphs, decode_buckets
from quickmoe.llm import LLM

CKPT = dict(layers=2, experts=4, hidden_size=64, intermediate_size=64, num_experts_per_tok=2, sliding_window=16,
            seed=43)


class _GarbageStaging:
    """Hands out arrays full of a value no real entry has (any element left unwritten shows in the tokens)."""

    def __init__(self) -> None:
        self.handed: list[tuple[tuple[int, ...], np.dtype]] = []

    def begin_step(self) -> None:
        pass

    def end_step(self) -> None:
        pass

    def host_array(self, shape, dtype):
        self.handed.append((tuple(shape), np.dtype(dtype)))
        return np.full(shape, 987_654, dtype=dtype)

    def to_device(self, array):  # not reached on the CPU (to_device copies host arrays itself)
        raise AssertionError("a CPU step does not stage")


def test_graph_path_writes_every_element_of_the_staged_arrays(ckpt_factory):
    model_dir = ckpt_factory(**CKPT)
    rng = np.random.default_rng(5)
    prompts = [[int(t) for t in rng.integers(0, 1000, size=int(n))] for n in rng.integers(1, 50, size=6)]
    params = [SamplingParams(max_tokens=int(n), temperature=0, ignore_eos=True) for n in (14, 4, 25, 9, 18, 6)]
    want = [o.token_ids for o in LLM(model_dir, device="cpu", max_model_len=128).generate(prompts, params)]
    padded = LLM(model_dir, device="cpu", max_model_len=128)
    padded.runner.graphs = DecodeGraphs(padded.runner, decode_buckets(8), capture=False)
    staging = padded.runner.staging = _GarbageStaging()
    assert [o.token_ids for o in padded.generate(prompts, params)] == want
    shapes = [shape for shape, _ in staging.handed]
    assert len(shapes) >= 2 * 10 and {s[-1] for s in shapes[::2]} >= {8, 4}  # meta, tables per step; padded buckets


@pytest.mark.gpu
def test_copies_arrive_intact_behind_busy_device_work():
    from quickmoe.executor.pinned_staging import PinnedStaging

    staging = PinnedStaging("cuda", nbytes=4096)
    rng = np.random.default_rng(7)
    sent, received = [], []
    for step in range(6):
        torch.cuda._sleep(20_000_000)  # the copies queue behind ~10 ms of device work
        staging.begin_step()
        arrays = [rng.integers(-2**40, 2**40, size=(3, 17)), rng.integers(-2**20, 2**20, size=40).astype(np.int32)]
        filled = staging.host_array((5, 7), np.int64)
        filled[...] = rng.integers(0, 2**50, size=(5, 7))
        arrays.append(filled.copy())
        received += [staging.to_device(a) for a in arrays[:2]] + [staging.to_device(filled)]
        sent += arrays
        staging.end_step()
    torch.cuda.synchronize()
    for want, got in zip(sent, received, strict=True):
        assert got.device.type == "cuda" and got.dtype == torch.from_numpy(want).dtype
        np.testing.assert_array_equal(got.cpu().numpy(), want)
    assert staging.fallbacks == 0


@pytest.mark.gpu
def test_a_step_too_large_for_its_buffer_still_arrives_and_the_buffer_grows():
    from quickmoe.executor.pinned_staging import PinnedStaging

    staging = PinnedStaging("cuda", nbytes=1024)
    rng = np.random.default_rng(8)
    big = rng.standard_normal((64, 33))  # 16.9 KB
    staging.begin_step()
    got = staging.to_device(big)
    staging.end_step()
    assert staging.fallbacks == 1
    staging.begin_step()  # the other buffer, not yet grown
    staging.end_step()
    staging.begin_step()  # the first buffer again: enlarged now that its copies are done
    again = staging.to_device(big)
    staging.end_step()
    torch.cuda.synchronize()
    np.testing.assert_array_equal(got.cpu().numpy(), big)
    np.testing.assert_array_equal(again.cpu().numpy(), big)
    assert staging.fallbacks == 1 and max(staging.nbytes) >= big.nbytes
    loose = rng.standard_normal(5)
    outside = staging.to_device(loose)  # outside a step: pin_memory(), still correct
    torch.cuda.synchronize()
    np.testing.assert_array_equal(outside.cpu().numpy(), loose)

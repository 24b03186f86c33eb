"""AsyncEngine over a scripted engine (no model): outputs arrive in order with their times, the thread sleeps
while idle, a full queue is refused, a failing step fails only its requests, a dead thread fails everything in
flight, and shutdown ends what is left. Each test runs twice: the step loop on a thread of the event loop's
process ("thread"), and behind a real pipe (`engine_process`: EngineHost on one end, RemoteCore on the other,
every request and output pickled across), as `quickmoe serve` runs it (the `backend` fixture,
conftest.py)."""

from __future__ import annotations

import asyncio

import pytest

from quickmoe.engine.engine import StepOutput
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.server.engine_errors import EngineDrained, EngineOverloaded, EngineStepFailed, EngineUnavailable
from quickmoe.server.metrics import ServerMetrics

from .scripted import ScriptedEngine, collect


def test_outputs_arrive_in_order_and_the_idle_thread_sleeps(backend):
    engine = ScriptedEngine()
    metrics = ServerMetrics("m")

    async def main():
        async_engine = backend(engine, max_waiting=8, metrics=metrics)
        async_engine.start()
        streams = [async_engine.add_request(f"r{i}", [1, 2, 3], SamplingParams(max_tokens=4 + i)) for i in range(3)]
        results = await asyncio.gather(*(collect(s) for s in streams))
        steps = engine.steps
        await asyncio.sleep(0.2)
        idle_steps = engine.steps - steps
        await async_engine.shutdown()
        return results, idle_steps

    results, idle_steps = asyncio.run(main())
    for i, outs in enumerate(results):
        assert [t for o in outs for t in o.output.token_ids] == list(range(1, 5 + i))
        assert outs[-1].output.finish_reason == "length"
        assert [o.time for o in outs] == sorted(o.time for o in outs)
    assert idle_steps == 0
    counts = [metrics.registry.get_sample_value(f"quickmoe:{stem}_count", {"model_name": "m"})
              for stem in ("time_to_first_token_seconds", "e2e_request_latency_seconds", "inter_token_latency_seconds")]
    assert counts == [3, 3, 3 + 4 + 5]


def test_a_full_queue_is_refused_and_a_failing_step_fails_only_its_requests(backend):
    engine = ScriptedEngine(max_running=1)

    async def main():
        async_engine = backend(engine, max_waiting=1)
        async_engine.start()
        first = async_engine.add_request("a", [1], SamplingParams(max_tokens=50))
        await first.__anext__()  # "a" runs
        second = async_engine.add_request("b", [1], SamplingParams(max_tokens=2))  # waits
        with pytest.raises(EngineOverloaded):
            async_engine.add_request("c", [1], SamplingParams(max_tokens=2))
        engine.fail = RuntimeError("boom")  # the next step fails while "a" runs
        with pytest.raises(EngineStepFailed, match="boom"):
            await collect(first)
        rest = await collect(second)  # "b" was waiting: it is not failed, and runs next
        assert [t for o in rest for t in o.output.token_ids] == [1, 2]
        assert async_engine.running
        later = await collect(async_engine.add_request("d", [1], SamplingParams(max_tokens=3)))
        assert later[-1].output.finished
        await async_engine.shutdown()

    asyncio.run(main())


def test_a_dead_engine_thread_fails_every_request_in_flight(backend):
    engine = ScriptedEngine()

    async def main():
        async_engine = backend(engine, max_waiting=8)
        async_engine.start()
        stream = async_engine.add_request("a", [1], SamplingParams(max_tokens=100))
        await stream.__anext__()
        engine.fail = SystemExit("the loop itself breaks")  # not an Exception: the thread ends
        with pytest.raises(EngineStepFailed):
            await collect(stream)
        assert not async_engine.running
        with pytest.raises(EngineUnavailable):
            async_engine.add_request("b", [1], SamplingParams(max_tokens=2))
        await async_engine.shutdown()

    asyncio.run(main())


def test_shutdown_ends_the_requests_left(backend):
    engine = ScriptedEngine()

    async def main():
        async_engine = backend(engine, max_waiting=8)
        async_engine.start()
        stream = async_engine.add_request("a", [1], SamplingParams(max_tokens=10**6))
        await stream.__anext__()
        async_engine.begin_drain()
        with pytest.raises(EngineUnavailable, match="shutting down"):
            async_engine.add_request("b", [1], SamplingParams(max_tokens=2))
        await async_engine.shutdown()
        with pytest.raises(EngineDrained, match="shutting down"):  # a 503 for its handler
            await collect(stream)
        assert not engine.live  # the engine freed it

    asyncio.run(main())


def _timed(rid: str, index: int, tokens: list[int], done: bool, t: float, logprob: bool = True):
    from quickmoe.engine.outputs import TokenLogprob
    from quickmoe.server.async_engine import TimedOutput

    logprobs = [TokenLogprob(tok, -0.5 * tok) for tok in tokens] if logprob else None
    out = StepOutput(rid, tokens, "".join(f"<{tok}>" for tok in tokens), logprobs, done, "length" if done else None,
                     None, 3, tokens[-1], index, scheduled_time=1.0 if tokens[0] == 1 else None)
    return TimedOutput(out, t)


def test_a_reader_that_fell_behind_gets_what_piled_up_as_one_output_per_sample():
    """Outputs delivered while the reader was busy come as one per run of a sample: tokens, text and
    log-probabilities in order, the last one's end and time; samples and errors keep their places."""
    import random

    from quickmoe.server.async_engine import RequestStream

    rng = random.Random()
    n_a, n_b = rng.randint(2, 6), rng.randint(1, 4)

    async def main():
        stream = RequestStream("r", 3, num_samples=2)
        got = []
        plan = [(0, k) for k in range(1, n_a + 1)] + [(1, k) for k in range(1, n_b + 1)] + [(0, n_a + 1)]
        for i, (index, tok) in enumerate(plan):  # all delivered before the first read
            last = index == 0 and tok == n_a + 1
            stream._put(_timed("r", index, [tok], last, float(i)))
        got.append(await stream.__anext__())  # sample 0's n_a tokens
        got.append(await stream.__anext__())  # sample 1's n_b tokens
        got.append(await stream.__anext__())  # sample 0's last token, alone (sample 1's run came between)
        stream._put(_timed("r", 1, [n_b + 1], False, 50.0))
        stream._put(_timed("r", 1, [n_b + 2], True, 51.0, logprob=False))
        stream._put(RuntimeError("after the end"))  # never read: the stream ended with both samples finished
        got.append(await stream.__anext__())
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
        return got

    got = asyncio.run(main())
    outs = [g.output for g in got]
    assert [(o.index, o.token_ids) for o in outs] == [
        (0, list(range(1, n_a + 1))), (1, list(range(1, n_b + 1))), (0, [n_a + 1]), (1, [n_b + 1, n_b + 2])]
    assert outs[0].text == "".join(f"<{k}>" for k in range(1, n_a + 1)) and outs[0].scheduled_time == 1.0
    assert [lp.token_id for lp in outs[0].logprobs] == list(range(1, n_a + 1))
    assert [lp.token_id for lp in outs[3].logprobs] == [n_b + 1]  # the later output had none
    assert [o.finished for o in outs] == [False, False, True, True] and outs[3].num_output_tokens == n_b + 2
    assert [g.time for g in got] == [n_a - 1, n_a + n_b - 1, n_a + n_b, 51.0]


def test_an_error_after_outputs_comes_after_them():
    from quickmoe.server.async_engine import RequestStream

    async def main():
        stream = RequestStream("r", 3)
        stream._put(_timed("r", 0, [1], False, 0.0))
        stream._put(_timed("r", 0, [2], False, 1.0))
        stream._put(EngineStepFailed("boom"))
        first = await stream.__anext__()
        with pytest.raises(EngineStepFailed, match="boom"):
            await stream.__anext__()
        return first

    assert asyncio.run(main()).output.token_ids == [1, 2]

"""AsyncEngine: the engine's step loop (server/engine_core.py) serving asyncio request handlers.

    engine = AsyncEngine(llm.engine, max_waiting=256, metrics=metrics)   # or AsyncEngine(RemoteCore(...), ...)
    engine.start()                                  # on the event loop: captures it, starts the step loop
    stream = engine.add_request(rid, prompt_ids, params)   # RequestError / EngineOverloaded / EngineUnavailable
    async for timed in stream: ...                  # TimedOutput(StepOutput, monotonic time it was produced)
    engine.abort(rid)                               # the client went away: its KV blocks go at the next step
    doc = await engine.profile_steps(8, timeout_s=60)   # the op families of the next 8 steps (ProfileBusy, timeout)
    await engine.shutdown()                         # after the HTTP server drained

The step loop runs on a thread of this process (an `Engine`: LocalCore) or in the engine's own process
(`engine_process.RemoteCore`). Each step's batch of outputs reaches the event loop in one call; each request has a
queue of its own, whose reader takes what piled up since it last read as one output (a busy loop then does one
chunk's work for several tokens). A step that raises fails the requests it was running (EngineStepFailed); the
loop goes on serving the others. A loop that dies fails everything in flight and /health turns 503.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from quickmoe.engine.outputs import StepOutput, merge_outputs
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.server.core_client import CoreClient, LocalCore
from quickmoe.server.engine_core import IDLE_WORK_DELAY_S, CoreBatch
from quickmoe.server.engine_errors import (EngineDrained, EngineOverloaded, EngineStepFailed, EngineUnavailable,
                                           ProfileBusy)
from quickmoe.server.metrics import EngineSnapshot, ServerMetrics

__all__ = ["AsyncEngine", "IDLE_WORK_DELAY_S", "RequestStream", "TimedOutput"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TimedOutput:
    output: StepOutput
    time: float  # time.monotonic() when the step that produced it ended


class RequestStream:
    """The outputs of one request, in order, ending with the one marked `finished` (or an EngineStepFailed)."""

    def __init__(self, request_id: str, num_prompt_tokens: int, arrival: float | None = None,
                 num_samples: int = 1) -> None:
        self.request_id = request_id
        self.num_samples = num_samples  # n: the stream ends when each sample has finished
        self._num_finished = 0
        self.num_prompt_tokens = num_prompt_tokens
        self.arrival = time.monotonic() if arrival is None else arrival  # what TTFT and E2E latency count from
        self.first_token_time: float | None = None
        self.last_token_time: float | None = None
        self.num_output_tokens = 0  # of all samples
        self.num_finished_samples = 0  # seen by the engine thread's delivery (the consumer counts its own)
        self.finished = False
        self._items: deque[TimedOutput | BaseException] = deque()  # delivered, not read yet
        self._ready = asyncio.Event()

    def _put(self, item: TimedOutput | BaseException) -> None:
        self._items.append(item)
        self._ready.set()

    def __aiter__(self) -> RequestStream:
        return self

    async def __anext__(self) -> TimedOutput:
        """The next output; when the reader fell behind (several outputs of one sample delivered since it last
        read), they come as one (`merge_outputs`): a stream chunk with several tokens, as vLLM sends, so a busy
        event loop does one chunk's work for them, not one per token."""
        if self.finished:
            raise StopAsyncIteration
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        item = self._items.popleft()
        if isinstance(item, BaseException):
            self.finished = True
            raise item
        while self._items and isinstance(self._items[0], TimedOutput) and not item.output.finished \
                and self._items[0].output.index == item.output.index:
            later = self._items.popleft()
            item = TimedOutput(merge_outputs(item.output, later.output), later.time)
        if item.output.finished:
            self._num_finished += 1
            self.finished = self._num_finished == self.num_samples
        return item


class AsyncEngine:
    """Serves requests made on one asyncio loop from an engine's step loop (see the module docstring). `engine`: an
    `Engine` (its loop then runs on a thread here) or a `CoreClient` (e.g. a RemoteCore)."""

    def __init__(self, engine, *, max_waiting: int, metrics: ServerMetrics | None = None,
                 stats_interval_s: float | None = None, log_requests: bool = False, time_steps: bool = False) -> None:
        if max_waiting < 1:
            raise ValueError(f"max_waiting = {max_waiting}: expected >= 1")
        self.core: CoreClient = engine if isinstance(engine, CoreClient) else \
            LocalCore(engine, stats_interval_s=stats_interval_s, time_steps=time_steps)
        self.max_waiting = max_waiting
        self.metrics = metrics
        self.log_requests = log_requests
        self.snapshot = EngineSnapshot()
        self._streams: dict[str, RequestStream] = {}  # event-loop side: requests not finished
        self._started = False
        self._draining = False
        self._dead = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._profile_waiter: tuple[int, asyncio.Future] | None = None  # the step profile awaited now
        self._profile_ids = 0

    # -- life cycle (event loop) --------------------------------------------------------------------
    def start(self) -> None:
        """Start the step loop; call from the event loop that will make the requests."""
        assert not self._started, "AsyncEngine.start() twice"
        self._loop = asyncio.get_running_loop()
        self._started = True
        self.core.start(self._post)

    @property
    def running(self) -> bool:
        """Started, its step loop alive, and not shutting down."""
        return self._started and self.core.alive and not self._dead and not self._draining

    def begin_drain(self) -> None:
        """Refuse new requests (503); the ones in flight go on."""
        self._draining = True

    def end_in_flight(self, reason: str) -> int:
        """End every request in flight now: its handler gets EngineDrained (503) and the engine frees its blocks
        at its next step. Returns how many there were."""
        streams = list(self._streams.items())
        for request_id, stream in streams:
            self.abort(request_id)
            stream._put(EngineDrained(f"the server is shutting down: {reason}"))
        return len(streams)

    async def shutdown(self, timeout: float = 10.0) -> None:
        """End what is still in flight (its handlers get EngineDrained), let the engine free it, and stop the
        step loop."""
        self._draining = True
        self.end_in_flight("this request did not finish before the server stopped")
        self.core.stop()
        if self._started and not await asyncio.to_thread(self.core.join, timeout):
            logger.error("the engine loop did not stop within %.0f s", timeout)

    # -- requests (event loop) ----------------------------------------------------------------------
    @property
    def num_in_flight(self) -> int:
        return len(self._streams)

    @property
    def num_waiting(self) -> int:
        """Requests accepted that the engine could not admit: those in flight beyond the running batch (as of the
        last step) and its free slots. The free slots of `max_num_seqs` count as capacity while the engine admits
        everything it is given (nothing waits in it for KV blocks), so a burst to an idle server is not counted
        as waiting before the engine had a step to run it."""
        snapshot = self.snapshot
        free_slots = 0 if snapshot.num_waiting else max(self.core.max_num_seqs - snapshot.num_running, 0)
        return max(len(self._streams) - snapshot.num_running - free_slots, 0)

    def add_request(self, request_id: str, prompt_ids: Sequence[int], params: SamplingParams,
                    arrival: float | None = None) -> RequestStream:
        """Queue a request; `arrival` (time.monotonic(), default now) is when its HTTP request came in."""
        if not self.running:
            raise EngineUnavailable("the server is shutting down" if self._draining else "the engine is not running")
        if self.num_waiting >= self.max_waiting:
            raise EngineOverloaded(f"{self.num_waiting} requests are waiting already (the queue holds "
                                   f"{self.max_waiting}); retry later")
        stream = RequestStream(request_id, len(prompt_ids), arrival, params.n)
        self.core.add_request(request_id, list(prompt_ids), params)  # RequestError before anything is kept
        if self.log_requests:
            logger.info("request %s: %d prompt tokens, %s", request_id, len(prompt_ids), params)
        self._streams[request_id] = stream
        return stream

    def abort(self, request_id: str, reason: str = "abort") -> None:
        """Drop a request that has not finished: its client left ("abort"), or the server found the end of its
        reply itself ("stop": a chat stop string). Nothing happens for a finished or unknown request."""
        stream = self._streams.pop(request_id, None)
        if stream is not None:
            self.core.abort(request_id)
            self._finished(stream, reason, time.monotonic())

    def abort_sample(self, request_id: str, index: int) -> None:
        """Stop one of a request's n samples (the server found its end: a chat stop string); its stream still
        receives that sample's finished output."""
        if request_id in self._streams:
            self.core.abort(request_id, index)

    def _deliver(self, outputs: list[StepOutput], now: float) -> None:
        metrics = self.metrics
        for out in outputs:
            stream = self._streams.get(out.request_id)
            if stream is None:
                continue  # aborted by the server side already
            if out.token_ids:
                if metrics is not None:
                    metrics.count_generated(len(out.token_ids))
                if stream.first_token_time is None:
                    stream.first_token_time = now
                    if metrics is not None:
                        metrics.observe_first_token(now - stream.arrival)
                        if out.scheduled_time is not None:
                            metrics.observe_queue_time(max(out.scheduled_time - stream.arrival, 0.0))
                elif metrics is not None:
                    metrics.observe_token_gap(now - stream.last_token_time)
                stream.last_token_time = now
            stream.num_output_tokens += len(out.token_ids)
            if out.finished:
                stream.num_finished_samples += 1
            if stream.num_finished_samples == stream.num_samples:
                del self._streams[out.request_id]
                self._finished(stream, out.finish_reason or "stop", now)
            stream._put(TimedOutput(out, now))

    def _finished(self, stream: RequestStream, reason: str, now: float) -> None:
        if self.metrics is not None:
            self.metrics.observe_finished(reason, now - stream.arrival, stream.num_prompt_tokens)
        if self.log_requests:
            logger.info("request %s finished (%s): %d prompt + %d generated tokens in %.3f s", stream.request_id,
                        reason, stream.num_prompt_tokens, stream.num_output_tokens, now - stream.arrival)

    def _fail(self, request_ids: Sequence[str], error: str) -> None:
        ids = request_ids or list(self._streams)
        for request_id in ids:
            stream = self._streams.pop(request_id, None)
            if stream is not None:
                if self.core.alive:
                    self.core.abort(request_id)
                stream._put(EngineStepFailed(f"the engine failed while running this request ({error})"))

    async def profile_steps(self, steps: int, *, timeout_s: float) -> dict:
        """The op-family summary of the next `steps` steps the loop runs (fewer if its work runs out first; see
        server/engine_core.py), or {"error": ...} (not a CUDA device, the loop stopped). ProfileBusy while another
        profile is awaited; asyncio.TimeoutError when no summary came within `timeout_s` (an idle engine: the
        profile waits for steps; its late result is dropped)."""
        if not self.running:
            raise EngineUnavailable("the engine is not running")
        if self._profile_waiter is not None:
            raise ProfileBusy("a step profile is already running; ask again when it has answered")
        self._profile_ids += 1
        future = self._loop.create_future()
        self._profile_waiter = (self._profile_ids, future)
        self.core.profile(self._profile_ids, steps)
        try:
            return await asyncio.wait_for(future, timeout_s)
        finally:
            self._profile_waiter = None

    def _on_batch(self, batch: CoreBatch) -> None:
        """A batch from the step loop (on the event loop)."""
        if batch.profile is not None:
            waiter = self._profile_waiter
            if waiter is not None and waiter[0] == batch.profile[0] and not waiter[1].done():
                waiter[1].set_result(batch.profile[1])
        if batch.snapshot is not None:
            self.snapshot = batch.snapshot
        if batch.outputs:
            self._deliver(batch.outputs, batch.time)
        if batch.dead:
            self._dead = True
        if batch.failed is not None:
            self._fail(batch.failed, batch.error)

    # -- the step loop's thread ---------------------------------------------------------------------
    def _post(self, batch: CoreBatch) -> None:
        try:
            self._loop.call_soon_threadsafe(self._on_batch, batch)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            logger.debug("event loop closed; dropping engine outputs")

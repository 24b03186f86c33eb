"""The two ways a server reaches the engine's step loop (`server/engine_core.EngineCore`): `CoreClient` is what
`AsyncEngine` talks to; `LocalCore` runs an EngineCore on a thread of this process (its batches reach the event loop
through `call_soon_threadsafe`); `engine_process.RemoteCore` reaches one in another process, so the step loop and
the HTTP event loop do not share a GIL.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from quickmoe.engine.request_checks import RequestChecker
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.server.engine_core import CoreBatch, EngineCore

__all__ = ["CoreClient", "LocalCore"]

logger = logging.getLogger(__name__)


class CoreClient:
    """What AsyncEngine needs of an engine loop: start it with a `publish` callback (called on a thread other than
    the event loop's), requests and aborts (from the event loop), stop, and the facts the server answers with."""

    checker: RequestChecker
    max_num_seqs: int

    def start(self, publish: Callable[[CoreBatch], None]) -> None:
        raise NotImplementedError

    def add_request(self, request_id: str, prompt_ids: Sequence[int], params: SamplingParams) -> None:
        raise NotImplementedError

    def abort(self, request_id: str, index: int | None = None) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def profile(self, profile_id: int, steps: int) -> None:
        """Trace the loop's next `steps` steps (`EngineCore.request_profile`); the result comes as a published
        CoreBatch whose `profile` is (profile_id, summary)."""
        raise NotImplementedError

    def join(self, timeout: float) -> bool:
        """Wait for the loop to end; False when it did not within `timeout`."""
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        raise NotImplementedError


class LocalCore(CoreClient):
    """An EngineCore on a thread of this process."""

    def __init__(self, engine, *, stats_interval_s: float | None = None, time_steps: bool = False) -> None:
        self.engine = engine
        self.checker = getattr(engine, "checker", None)
        self.max_num_seqs = engine.scheduler.max_num_seqs
        self._stats_interval_s = stats_interval_s
        self._time_steps = time_steps
        self._core: EngineCore | None = None
        self._thread: threading.Thread | None = None
        self._publish: Callable[[CoreBatch], None] | None = None

    def start(self, publish: Callable[[CoreBatch], None]) -> None:
        assert self._thread is None, "LocalCore.start() twice"
        self._publish = publish
        self._core = EngineCore(self.engine, publish, stats_interval_s=self._stats_interval_s,
                                time_steps=self._time_steps)
        self._thread = threading.Thread(target=self._core.run, name="quickmoe-engine", daemon=True)
        self._thread.start()

    def add_request(self, request_id: str, prompt_ids: Sequence[int], params: SamplingParams) -> None:
        self._core.add_request(request_id, prompt_ids, params)

    def abort(self, request_id: str, index: int | None = None) -> None:
        self._core.abort(request_id, index)

    def stop(self) -> None:
        if self._core is not None:
            self._core.stop()

    def profile(self, profile_id: int, steps: int) -> None:
        self._core.request_profile(steps, lambda doc: self._publish(CoreBatch(profile=(profile_id, doc))))

    def join(self, timeout: float) -> bool:
        if self._thread is None:
            return True
        self._thread.join(timeout)
        if not self._thread.is_alive():
            logger.info("engine stopped; %d sequence(s) hold KV blocks", self.engine.blocks.num_sequences)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

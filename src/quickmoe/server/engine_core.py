"""EngineCore: the engine's step loop as a server runs it, and the two ways a server reaches it.

    core = EngineCore(engine, publish)   # publish(CoreBatch) after every step that has something to say
    core.add_request(rid, prompt_ids, params); core.abort(rid)   # any thread
    core.run()                            # the loop, on its own thread (or a process's main thread) until stop()

The loop sleeps while the engine has nothing to do and steps while it has. Once idle for IDLE_WORK_DELAY_S it runs
the engine's idle work (decode CUDA graphs left for later, MoE kernels of prefill sizes), one piece at a time,
checking for requests in between. A step that raises is logged, the requests it ran (or, when none ran, every
queued one) are aborted and published as failed, and the loop goes on; a loop that breaks publishes `dead`.

`request_profile(steps, reply)` (a server started with --enable-step-profile: POST /profile_steps) traces the next
`steps` steps the loop runs (engine/step_profile.py; fewer if the engine runs out of work first) and calls
`reply(summary)` on the loop's thread, or `reply({"error": ...})`; requests wait for work, one profile at a time.

What `AsyncEngine` talks to is a `server/core_client.CoreClient`: `LocalCore` runs an EngineCore on a thread of this
process, `engine_process.RemoteCore` one in another process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from quickmoe.engine.outputs import StepOutput
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.engine.step_profile import EngineStepProfile
from quickmoe.server.metrics import EngineSnapshot
from quickmoe.server.stats_log import StatsLogger

__all__ = ["CoreBatch", "EngineCore", "IDLE_WORK_DELAY_S", "engine_snapshot"]

logger = logging.getLogger(__name__)

IDLE_WORK_DELAY_S = 0.5  # idle this long (no request in the engine) before the engine's idle work starts


@dataclass(frozen=True)
class CoreBatch:
    """What the loop publishes: the outputs of one step and the engine's state after it (`time`: time.monotonic()
    when the step ended, one clock for every process of the machine); or the requests a failed step was running
    (`failed`, empty: every request in flight) with the error; or `dead`: the loop stopped for good."""

    outputs: list[StepOutput] = field(default_factory=list)
    time: float = 0.0
    snapshot: EngineSnapshot | None = None
    failed: tuple[str, ...] | None = None
    error: str = ""
    dead: bool = False
    profile: tuple[int, dict] | None = None  # (the request's id, its summary or {"error": ...}): request_profile


def engine_snapshot(engine) -> EngineSnapshot:
    stats = engine.stats()
    return EngineSnapshot(num_running=stats.num_running, num_waiting=stats.num_waiting,
                          kv_cache_usage=tuple(sorted(stats.kv_cache_usage.items())),
                          num_sequences_with_blocks=engine.blocks.num_sequences, num_preemptions=stats.num_preemptions,
                          num_prefix_queries=stats.num_prefix_queries, num_prefix_hits=stats.num_prefix_hits,
                          num_scheduled_tokens=stats.num_scheduled_tokens, steps=stats.steps)


class EngineCore:
    """The step loop over one `Engine` (see the module docstring); `publish` is called on the loop's thread."""

    def __init__(self, engine, publish: Callable[[CoreBatch], None], *, stats_interval_s: float | None = None,
                 time_steps: bool = False) -> None:
        self.engine = engine
        self.publish = publish
        self.stats = StatsLogger(stats_interval_s) if stats_interval_s else None
        self.time_steps = time_steps  # the engine times its steps (device, idle and host time: /metrics shows them)
        self._wakeup = threading.Condition()
        self._stop = False
        self._profile_requests: list[tuple[int, Callable[[dict], None]]] = []  # (steps, reply), under _wakeup
        self._profile: tuple[EngineStepProfile, int, Callable[[dict], None]] | None = None  # running: the loop's

    def add_request(self, request_id: str, prompt_ids: Sequence[int], params: SamplingParams) -> None:
        """Queue a request (RequestError when the engine refuses it; nothing is kept then)."""
        self.engine.add_request(request_id, list(prompt_ids), params)
        self._wake()

    def abort(self, request_id: str, index: int | None = None) -> None:
        if index is None:
            self.engine.abort(request_id)
        else:
            self.engine.abort(request_id, index)
        self._wake()

    def stop(self) -> None:
        """End the loop once the engine has nothing left to run (abort what should not finish first)."""
        with self._wakeup:
            self._stop = True
            self._wakeup.notify()

    def _wake(self) -> None:
        with self._wakeup:
            self._wakeup.notify()

    def request_profile(self, steps: int, reply: Callable[[dict], None]) -> None:
        """Trace the next `steps` steps (see the module docstring); any thread."""
        with self._wakeup:
            self._profile_requests.append((steps, reply))
            self._wakeup.notify()

    def _start_profile(self) -> None:
        """Before a step (the loop's thread): start the next requested profile if none runs."""
        if self._profile is not None or not self._profile_requests:
            return
        with self._wakeup:
            steps, reply = self._profile_requests.pop(0)
        try:
            self._profile = (EngineStepProfile(self.engine), steps, reply)
        except ValueError as exc:  # the engine cannot be profiled (its device): the reason
            reply({"error": str(exc)})
        except Exception as exc:  # the profiler's own failure must not end the loop
            logger.exception("the step profile could not start")
            reply({"error": f"{type(exc).__name__}: {exc}"})

    def _end_profile(self, ran_step: bool) -> None:
        """After a step (`ran_step`: it ran), or when the engine has no work left (False): count the step and reply
        once the profile has its steps, or has any and the work ran out."""
        if self._profile is None:
            return
        profile, steps, reply = self._profile
        profile.steps += ran_step
        if ran_step and profile.steps < steps:
            return
        self._profile = None
        if profile.steps == 0:
            reply({"error": "no step ran while profiling"})
            return
        try:
            reply(profile.finish())
        except Exception as exc:  # the profiler's own failure must not end the loop
            logger.exception("the step profile failed")
            reply({"error": f"{type(exc).__name__}: {exc}"})

    def run(self) -> None:
        if self.time_steps:
            self.engine.time_steps()
        try:
            self._serve_steps()
        except BaseException as exc:  # the loop itself broke: nothing will serve the requests in flight
            self._refuse_profiles("the engine loop died")
            logger.critical("the engine loop died; failing every request in flight", exc_info=exc)
            self.publish(CoreBatch(time=time.monotonic(), snapshot=engine_snapshot(self.engine), failed=(),
                                   error=f"{type(exc).__name__}: {exc}", dead=True))
            return
        self._refuse_profiles("the engine stopped")
        self.publish(CoreBatch(time=time.monotonic(), snapshot=engine_snapshot(self.engine)))
        logger.debug("engine loop stopped")

    def _refuse_profiles(self, reason: str) -> None:
        """The loop ends: the running profile and those waiting get `reason` (nothing is traced any more)."""
        with self._wakeup:
            waiting, self._profile_requests = self._profile_requests, []
        running, self._profile = self._profile, None
        for reply in ([running[2]] if running is not None else []) + [reply for _, reply in waiting]:
            reply({"error": reason})

    def _wait_for_work(self) -> bool:
        """Sleep until the engine has requests (True) or the loop is stopped with none left (False). Idle for
        IDLE_WORK_DELAY_S, run the engine's idle work one piece at a time until it has none (or fails: logged)."""
        engine = self.engine
        if not engine.has_unfinished():
            self._end_profile(ran_step=False)  # a profile ends with the work: it covers the steps that ran
        delay: float | None = IDLE_WORK_DELAY_S
        while True:
            with self._wakeup:
                deadline = None if delay is None else time.monotonic() + delay
                if self.time_steps and not engine.has_unfinished():
                    engine.note_idle()  # the wait for requests is not the device waiting for the host
                while not self._stop and not engine.has_unfinished():
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        break
                    self._wakeup.wait(remaining)
                else:
                    return engine.has_unfinished()
            try:
                delay = 0.0 if engine.idle_work() else None
            except Exception:  # e.g. a capture out of memory: the steps still run (eagerly where no graph)
                logger.exception("the engine's idle work failed; no more of it")
                delay = None

    def _serve_steps(self) -> None:
        engine = self.engine
        failures = 0
        while True:
            if not self._wait_for_work():
                return
            self._start_profile()
            try:
                outputs = engine.step()
            except Exception as exc:  # a bug or a device error: fail the requests of this step, keep serving
                self._end_profile(ran_step=False)
                failures += 1
                scheduler = engine.scheduler
                failed = [seq.request_id for seq in scheduler.running] or [s.request_id for s in scheduler.waiting]
                logger.exception("engine step failed; failing %s", f"{len(failed)} request(s)" if failed
                                 else "every request in flight")
                for request_id in failed:
                    engine.abort(request_id)
                self.publish(CoreBatch(time=time.monotonic(), snapshot=engine_snapshot(engine),
                                       failed=tuple(dict.fromkeys(failed)), error=f"{type(exc).__name__}: {exc}"))
                time.sleep(0.001 * 2 ** min(failures, 10))  # a failure that repeats must not spin
                continue
            failures = 0
            self._end_profile(ran_step=True)
            snapshot = engine_snapshot(engine)
            if self.stats is not None:
                self.stats.count_generated(sum(len(out.token_ids) for out in outputs))
                self.stats.maybe_log(snapshot)
            self.publish(CoreBatch(outputs, time.monotonic(), snapshot))
            if not outputs and snapshot.num_running == 0:
                with self._wakeup:  # queued but nothing admitted (nor anything to wait for): do not spin
                    self._wakeup.wait(0.005)

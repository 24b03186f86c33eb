"""A scripted engine for the step loop's tests (no model): one token per step for each request; `collect` reads a
request stream to its end. The `backend` fixture (conftest.py) runs an AsyncEngine over it on a thread or behind
the engine process's pipe."""

from __future__ import annotations

import threading
import time
from collections import deque
from types import SimpleNamespace

from quickmoe.engine.engine import EngineStats, StepOutput

__all__ = ["ScriptedEngine", "collect"]


class ScriptedEngine:
    """One token per step for each request (its id is the token count so far), `max_tokens` of them; at most
    `max_running` run at once. `fail` (an exception) is raised by the next step."""

    def __init__(self, max_running: int = 8) -> None:
        self.lock = threading.Lock()
        self.inbox: list[tuple[str, int]] = []
        self.aborts: list[str] = []
        self.live: dict[str, int] = {}
        self.scheduler = SimpleNamespace(running=[], waiting=deque(), max_num_seqs=max_running)
        self.blocks = SimpleNamespace(num_sequences=0)
        self.max_running = max_running
        self.steps = 0
        self.fail: BaseException | None = None
        self.produced: dict[str, int] = {}

    def add_request(self, request_id, prompt_ids, params):
        with self.lock:
            self.live[request_id] = params.max_tokens
            self.inbox.append((request_id, len(prompt_ids)))
        return len(prompt_ids)

    def abort(self, request_id):
        with self.lock:
            self.aborts.append(request_id)

    def has_unfinished(self):
        with self.lock:
            return bool(self.live)

    def live_request_ids(self):
        with self.lock:
            return list(self.live)

    def time_steps(self):
        pass

    def note_idle(self):
        pass

    def idle_work(self):
        return False

    def stats(self):
        return EngineStats(len(self.scheduler.running), len(self.scheduler.waiting), {"full": 0.0}, 0)

    def _out(self, rid: str, tokens: list[int], finished: bool, reason: str | None) -> StepOutput:
        return StepOutput(rid, tokens, "".join(f"<{t}>" for t in tokens), None, finished, reason, None, 3,
                          self.produced.get(rid, 0))

    def step(self):
        self.steps += 1
        outputs = []
        with self.lock:
            inbox, self.inbox = self.inbox, []
            aborts, self.aborts = self.aborts, []
        for rid, _ in inbox:
            self.scheduler.waiting.append(SimpleNamespace(request_id=rid))
        for rid in aborts:
            for queue in (self.scheduler.running, self.scheduler.waiting):
                for seq in list(queue):
                    if seq.request_id == rid:
                        queue.remove(seq)
                        with self.lock:
                            self.live.pop(rid, None)
                        outputs.append(self._out(rid, [], True, "abort"))
        while self.scheduler.waiting and len(self.scheduler.running) < self.max_running:
            self.scheduler.running.append(self.scheduler.waiting.popleft())
        if self.fail is not None:
            exc, self.fail = self.fail, None
            raise exc
        for seq in list(self.scheduler.running):
            rid = seq.request_id
            self.produced[rid] = self.produced.get(rid, 0) + 1
            done = self.produced[rid] >= self.live[rid]
            if done:
                self.scheduler.running.remove(seq)
                with self.lock:
                    self.live.pop(rid)
            outputs.append(self._out(rid, [self.produced[rid]], done, "length" if done else None))
        time.sleep(0.002)
        return outputs


async def collect(stream):
    return [timed async for timed in stream]

"""Requests and aborts handed to the engine from other threads (the server's), taken in by the step thread.

`RequestInbox` holds, under one lock, the sequences added since the last step, the aborts asked for, and every
live request's samples (from `add` until all of them finished). With prefix caching a request's samples 1..n-1
are held back until sample 0 has computed the prompt, so they find its full blocks in the prefix cache.
"""

from __future__ import annotations

import threading

from quickmoe.engine.sequence import Sequence
from quickmoe.errors import RequestError

__all__ = ["RequestInbox"]


class RequestInbox:
    """The engine's thread-safe intake (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._incoming: list[Sequence] = []
        self._aborts: list[tuple[str, int | None]] = []
        self._live: dict[str, list[Sequence]] = {}  # request id -> its samples, from add until all finished
        self._held: list[tuple[Sequence, list[Sequence]]] = []  # (sample 0, the samples waiting for its prompt)

    def add(self, request_id: str, seqs: list[Sequence], hold_samples: bool) -> None:
        """Queue a request's samples; `hold_samples`: all but the first wait for its prompt (prefix caching).
        RequestError if the id is live."""
        with self._lock:
            if request_id in self._live:
                raise RequestError(f"request id {request_id!r} is already in use")
            self._live[request_id] = seqs
            if hold_samples and len(seqs) > 1:
                self._incoming.append(seqs[0])
                self._held.append((seqs[0], seqs[1:]))
            else:
                self._incoming.extend(seqs)

    def abort(self, request_id: str, index: int | None) -> None:
        """Ask for the request (or its sample `index`) to end at the next `take`."""
        with self._lock:
            self._aborts.append((request_id, index))

    def has_live(self) -> bool:
        with self._lock:
            return bool(self._live)

    def live_ids(self) -> list[str]:
        with self._lock:
            return list(self._live)

    def take(self) -> tuple[list[Sequence], list[Sequence]]:
        """(sequences to schedule now, unfinished sequences to abort) since the last call (step thread): the new
        ones, the held samples whose first sample has computed its prompt (or finished), and the live samples each
        abort names."""
        with self._lock:  # (`add` appends to _held from its thread: taken and put back under the lock)
            ready, self._incoming = self._incoming, []
            aborts, self._aborts = self._aborts, []
            held, self._held = self._held, []
        waiting = []
        for first, rest in held:
            if first.finished or first.num_computed >= len(first.prompt_ids):
                ready.extend(seq for seq in rest if not seq.finished)
            else:
                waiting.append((first, rest))
        with self._lock:
            self._held[:0] = waiting
        aborted: dict[int, Sequence] = {}  # by seq_id: a sample two aborts name ends once
        for request_id, index in aborts:
            with self._lock:
                seqs = list(self._live.get(request_id, ()))
            aborted.update((seq.seq_id, seq) for seq in seqs if not seq.finished and index in (None, seq.index))
        return ready, list(aborted.values())

    def retire(self, seq: Sequence) -> None:
        """`seq` finished: its request leaves the live set once all its samples have."""
        with self._lock:
            samples = self._live.get(seq.request_id, ())
            if all(s.finished for s in samples):
                self._live.pop(seq.request_id, None)

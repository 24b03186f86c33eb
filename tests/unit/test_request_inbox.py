"""RequestInbox: the engine's thread-safe intake of requests and aborts (engine/request_inbox.py), against a plain
record of what was added and aborted."""

from __future__ import annotations

import random
import threading
import time

import pytest

from quickmoe.engine.detokenizer import IncrementalDetokenizer
from quickmoe.engine.request_inbox import RequestInbox
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.engine.sequence import Sequence, SequenceStatus
from quickmoe.errors import RequestError
from quickmoe.tokenizer import O200kHarmonyTokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return O200kHarmonyTokenizer()


def _samples(tokenizer, request_id: str, n: int, first_id: int, prompt_len: int = 5) -> list[Sequence]:
    params = SamplingParams(max_tokens=4, temperature=0, n=n)
    return [Sequence(seq_id=first_id + i, request_id=request_id, prompt_ids=list(range(1, prompt_len + 1)),
                     params=params, stop_ids=frozenset(), max_total_tokens=prompt_len + 4,
                     detokenizer=IncrementalDetokenizer(tokenizer, params), generator=None, index=i)
            for i in range(n)]


def _finish(seq: Sequence) -> None:
    seq.status = SequenceStatus.FINISHED


def test_a_live_request_id_is_refused_and_freed_once_every_sample_finished(tokenizer):
    inbox = RequestInbox()
    a = _samples(tokenizer, "a", 2, 0)
    inbox.add("a", a, hold_samples=False)
    with pytest.raises(RequestError, match="'a' is already in use"):
        inbox.add("a", _samples(tokenizer, "a", 1, 10), hold_samples=False)
    assert inbox.take() == (a, []) and inbox.live_ids() == ["a"]
    _finish(a[0])
    inbox.retire(a[0])
    assert inbox.has_live()  # sample 1 still runs
    _finish(a[1])
    inbox.retire(a[1])
    assert not inbox.has_live()
    inbox.add("a", _samples(tokenizer, "a", 1, 20), hold_samples=False)  # the id is free again


def test_held_samples_wait_for_the_first_samples_prompt(tokenizer):
    inbox = RequestInbox()
    a = _samples(tokenizer, "a", 3, 0, prompt_len=5)
    inbox.add("a", a, hold_samples=True)
    assert inbox.take() == ([a[0]], [])
    a[0].num_computed = 4
    assert inbox.take() == ([], [])
    _finish(a[2])  # aborted while held: not scheduled
    a[0].num_computed = 5
    assert inbox.take() == ([a[1]], [])
    assert inbox.take() == ([], [])


def test_aborts_name_requests_or_samples_and_end_each_sample_once(tokenizer):
    inbox = RequestInbox()
    a, b = _samples(tokenizer, "a", 3, 0), _samples(tokenizer, "b", 2, 10)
    inbox.add("a", a, hold_samples=False)
    inbox.add("b", b, hold_samples=False)
    inbox.take()
    inbox.abort("a", None)
    inbox.abort("a", 1)  # the same sample again
    inbox.abort("b", 1)
    inbox.abort("unknown", None)
    _finish(a[2])  # finished before the abort was taken
    ready, aborted = inbox.take()
    assert ready == [] and [(s.request_id, s.index) for s in aborted] == [("a", 0), ("a", 1), ("b", 1)]
    assert inbox.take() == ([], [])


def test_requests_added_from_threads_during_takes_arrive_once(tokenizer):
    """Adders on four threads (half of them with held samples) while the step thread takes and completes prompts:
    every sample is handed out exactly once."""
    inbox = RequestInbox()
    requests = {f"t{t}r{i}": _samples(tokenizer, f"t{t}r{i}", 1 + (i % 3), 1000 * t + 10 * i)
                for t in range(4) for i in range(60)}

    def adder(t: int) -> None:
        rng = random.Random(t)
        for i in range(60):
            inbox.add(f"t{t}r{i}", requests[f"t{t}r{i}"], hold_samples=rng.random() < 0.5)

    threads = [threading.Thread(target=adder, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    seen: list[int] = []
    deadline = time.monotonic() + 30  # a lost sample would keep the loop waiting: the assert below says which
    while (any(thread.is_alive() for thread in threads) or len(seen) < sum(len(s) for s in requests.values())) \
            and time.monotonic() < deadline:
        ready, aborted = inbox.take()
        assert aborted == []
        for seq in ready:
            seq.num_computed = len(seq.prompt_ids)  # its prompt computed: held samples follow at the next take
        seen.extend(seq.seq_id for seq in ready)
    for thread in threads:
        thread.join()
    assert sorted(seen) == sorted(s.seq_id for seqs in requests.values() for s in seqs)

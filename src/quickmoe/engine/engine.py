"""The engine: requests in, incremental outputs out, one model step at a time.

    engine = Engine(runner, tokenizer, max_num_seqs=64, max_num_batched_tokens=8192)
    engine.add_request("a", "Hello", SamplingParams(max_tokens=32))   # validated now; RequestError if bad
    while engine.has_unfinished():
        for out in engine.step():          # StepOutput: new tokens and text of each request that moved
            ...
    engine.abort("a")                      # any time, from any thread: its KV blocks are freed at the next step

`add_request` and `abort` may be called from other threads (the server's); `step` runs on one thread (the
engine loop). A step: take in new and aborted requests -> `Scheduler.schedule` -> one model forward over
the scheduled chunks -> sample the sequences whose tokens are all computed -> stop checks (stop token ids,
stop strings on the incrementally decoded text, max_tokens, max_model_len) -> finished sequences free
their blocks.
"""

from __future__ import annotations

import itertools
import logging
import numbers
import threading
from collections.abc import Sequence as Seq
from dataclasses import dataclass

import torch

from quickmoe.engine.block_manager import KVBlockManager
from quickmoe.engine.detokenizer import IncrementalDetokenizer
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.engine.scheduler import Scheduler
from quickmoe.engine.sequence import Sequence, SequenceStatus
from quickmoe.errors import RequestError
from quickmoe.layers.sampler import SampledTokens, Sampler
from quickmoe.tokenizer.base import Tokenizer

__all__ = ["Engine", "EngineStats", "StepOutput", "TokenLogprob"]

logger = logging.getLogger(__name__)


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


@dataclass(frozen=True)
class TokenLogprob:
    """A generated token's log-probability under the model (raw logits), and the `top` most likely ones."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class StepOutput:
    """What one request gained in one step: new token ids and the text that is now safe to show.
    `finished` is set on its last output; finish_reason is "stop", "length" or "abort"."""

    request_id: str
    token_ids: list[int]
    text: str
    logprobs: list[TokenLogprob] | None
    finished: bool
    finish_reason: str | None
    stop_reason: int | str | None
    num_prompt_tokens: int
    num_output_tokens: int


@dataclass(frozen=True)
class EngineStats:
    num_running: int
    num_waiting: int
    kv_cache_usage: dict[str, float]  # fraction of each cache group's blocks in use
    num_preemptions: int


class Engine:
    """Continuous batching over the runner's paged KV cache (see the module docstring)."""

    def __init__(self, runner, tokenizer: Tokenizer, *, max_num_seqs: int, max_num_batched_tokens: int,
                 long_prefill_token_threshold: int | None = None) -> None:
        self.runner = runner
        self.tokenizer = tokenizer
        self.config = runner.config
        self.max_model_len: int = runner.max_model_len
        self.blocks = KVBlockManager.for_plan(runner.kv_cache.plan)
        self.scheduler = Scheduler(self.blocks, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                                   long_prefill_token_threshold=long_prefill_token_threshold)
        self.sampler = Sampler()
        self.eos_ids = frozenset(self.config.eos_token_ids) | frozenset(tokenizer.eos_token_ids)
        self._lock = threading.Lock()
        self._incoming: list[Sequence] = []
        self._aborts: list[str] = []
        self._live: dict[str, Sequence] = {}  # request id -> sequence, from add_request until finished
        self._seq_ids = itertools.count()

    # -- requests (any thread) --------------------------------------------------------------------
    def prompt_ids(self, prompt: str | Seq[int]) -> list[int]:
        """Tokenize (text) or check (ids) a prompt: RequestError when empty, out of the vocabulary, or leaving
        no room for one generated token within max_model_len."""
        if isinstance(prompt, str):
            ids = self.tokenizer.encode(prompt)
        elif isinstance(prompt, (bytes, bytearray)) or not isinstance(prompt, Seq) \
                or any(isinstance(t, bool) or not isinstance(t, numbers.Integral) for t in prompt):
            raise RequestError(f"prompt {_short(prompt)}: expected a string or a list of integer token ids")
        else:
            ids = [int(t) for t in prompt]
        if not ids:
            raise RequestError("empty prompt (expected at least one token)")
        bad = [t for t in ids if not 0 <= t < self.config.vocab_size]
        if bad:
            raise RequestError(f"token id {bad[0]} is outside the model's vocabulary [0, {self.config.vocab_size})")
        if len(ids) >= self.max_model_len:
            raise RequestError(f"{len(ids)} tokens leave no room to generate within max_model_len="
                               f"{self.max_model_len}")
        return ids

    def add_request(self, request_id: str, prompt: str | Seq[int], params: SamplingParams | None = None) -> int:
        """Queue a request (text or token ids); returns its prompt length. Generation stops at a stop token
        (EOS unless ignore_eos), a stop string, max_tokens, or max_model_len (finish_reason "length")."""
        params = params if params is not None else SamplingParams()
        if not isinstance(params, SamplingParams):
            raise RequestError(f"sampling params of {request_id!r}: expected SamplingParams, got "
                               f"{type(params).__name__}")
        ids = self.prompt_ids(prompt)
        generator = None
        if not params.greedy:
            seed = params.seed if params.seed is not None else int(torch.randint(0, 2**62, ()).item())
            generator = torch.Generator().manual_seed(seed)
        stop_ids = (frozenset() if params.ignore_eos else self.eos_ids) | frozenset(params.stop_token_ids)
        with self._lock:
            if request_id in self._live:
                raise RequestError(f"request id {request_id!r} is already in use")
            seq = Sequence(seq_id=next(self._seq_ids), request_id=request_id, prompt_ids=ids, params=params,
                           stop_ids=stop_ids, max_total_tokens=min(self.max_model_len, len(ids) + params.max_tokens),
                           detokenizer=IncrementalDetokenizer(self.tokenizer, params), generator=generator)
            self._live[request_id] = seq
            self._incoming.append(seq)
        return len(ids)

    def abort(self, request_id: str) -> None:
        """End a request at the next step (finish_reason "abort"), freeing its blocks; unknown or finished
        requests are ignored."""
        with self._lock:
            self._aborts.append(request_id)

    def has_unfinished(self) -> bool:
        with self._lock:
            return bool(self._live)

    def stats(self) -> EngineStats:
        return EngineStats(num_running=len(self.scheduler.running), num_waiting=len(self.scheduler.waiting),
                           kv_cache_usage=self.blocks.usage(), num_preemptions=self.scheduler.num_preemptions)

    # -- the engine loop (one thread) -------------------------------------------------------------
    def step(self) -> list[StepOutput]:
        """Run one model step; returns an output for every request that gained tokens or ended."""
        outputs = self._take_inbox()
        sched = self.scheduler.schedule()
        if not sched.chunks:
            return outputs
        chunks = sched.chunks
        logits = self.runner.execute([c.seq.token_ids(c.start, c.start + c.num_tokens) for c in chunks],
                                     [c.start for c in chunks],
                                     [self.blocks.block_tables(c.seq.seq_id) for c in chunks])  # [B, V] float32
        sampling = [i for i, c in enumerate(chunks) if c.samples]  # before step_done moves num_computed
        self.scheduler.step_done(sched)
        if sampling:
            rows = logits if len(sampling) == len(chunks) else logits[sampling]  # [S, V]
            seqs = [chunks[i].seq for i in sampling]
            sampled = self.sampler(rows, [s.params for s in seqs], [s.generator for s in seqs])
            outputs.extend(self._append(seq, sampled, j) for j, seq in enumerate(seqs))
        return outputs

    def _take_inbox(self) -> list[StepOutput]:
        with self._lock:
            incoming, self._incoming = self._incoming, []
            aborts, self._aborts = self._aborts, []
        for seq in incoming:
            self.scheduler.add(seq)
        outputs = []
        for request_id in aborts:
            with self._lock:
                seq = self._live.get(request_id)
            if seq is None or seq.finished:
                continue
            self.scheduler.finish(seq, "abort")
            outputs.append(self._finished(seq, "abort", [], None, ""))
        return outputs

    def _append(self, seq: Sequence, sampled: SampledTokens, row: int) -> StepOutput:
        """Add a sampled token to `seq` and decide whether it finished."""
        token = sampled.token_ids[row]
        seq.output_ids.append(token)
        logprobs = None
        if seq.params.logprobs is not None:
            top = sampled.top_logprobs[row] or []
            logprobs = [TokenLogprob(token, sampled.logprobs[row], tuple(top))]
        reason, stop_reason, text = None, None, ""
        if token in seq.stop_ids:  # the stop token's text is not part of the output
            reason, stop_reason = "stop", token
        else:
            text = seq.detokenizer.add([token])
            if seq.detokenizer.stop_string is not None:
                reason, stop_reason = "stop", seq.detokenizer.stop_string
            elif seq.num_tokens >= seq.max_total_tokens:
                reason = "length"
        if reason is None:
            return StepOutput(seq.request_id, [token], text, logprobs, False, None, None, len(seq.prompt_ids),
                              len(seq.output_ids))
        self.scheduler.finish(seq, reason)
        return self._finished(seq, reason, [token], logprobs, text, stop_reason)

    def _finished(self, seq: Sequence, reason: str, tokens: list[int], logprobs: list[TokenLogprob] | None,
                  text: str, stop_reason: int | str | None = None) -> StepOutput:
        assert seq.status is SequenceStatus.FINISHED
        seq.stop_reason = stop_reason
        if reason != "abort":
            text += seq.detokenizer.finish()
        with self._lock:
            self._live.pop(seq.request_id, None)
        return StepOutput(seq.request_id, tokens, text, logprobs, True, reason, stop_reason, len(seq.prompt_ids),
                          len(seq.output_ids))

"""The engine: requests in, incremental outputs out, one model step at a time.

    engine = Engine(runner, tokenizer, max_num_seqs=64, max_num_batched_tokens=8192)
    engine.add_request("a", "Hello", SamplingParams(max_tokens=32))   # validated now; RequestError if bad
    while engine.has_unfinished():
        for out in engine.step():          # StepOutput: new tokens and text of each request that moved
            ...
    engine.abort("a")                      # any time, from any thread: its KV blocks are freed at the next step

`add_request` and `abort` may be called from other threads (the server's); `step` runs on one thread (the
engine loop). A step: take in new and aborted requests -> `Scheduler.schedule` -> launch one model step
over the scheduled chunks, sampling the sequences whose tokens are all computed (on the device, nothing
waited for) -> collect the previous step's tokens -> stop checks (stop token ids, stop strings on the
incrementally decoded text, max_tokens, max_model_len) -> finished sequences free their blocks. The host
work of one step thus runs while the device computes the next (see `step`).

The pipelining rule: a request whose next token needs the previous one on the host
(`SamplingParams.needs_host_state`: penalties over its tokens) holds the pipeline up. While such a request runs
with a token in flight, `step` collects the previous step before it schedules and launches the next, so that
request samples from its known tokens; other requests in the same step are unaffected but for the wait.
Structured output (engine/structured_output.py) is not: the next step's forward is launched at once, and its token
mask is computed on a worker thread, once the previous step's tokens arrive, while the device runs that forward;
only the sampler waits for the mask.
A request with n > 1 runs as n sequences (its samples) whose outputs carry their `index`. With prefix caching,
samples 1..n-1 are held back until sample 0 has computed the prompt, so they take its full blocks from the prefix
cache (only the prompt's last partial block is computed again by each); without, each computes the prompt.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections.abc import Sequence as Seq
from dataclasses import dataclass

import torch

from quickmoe.engine.block_manager import KVBlockManager
from quickmoe.engine.detokenizer import IncrementalDetokenizer
from quickmoe.engine.outputs import EngineStats, StepOutput, TokenLogprob
from quickmoe.engine.request_checks import RequestChecker
from quickmoe.engine.request_inbox import RequestInbox
from quickmoe.engine.sampling_params import SamplingParams, StructuredOutput
from quickmoe.engine.scheduler import Scheduler
from quickmoe.engine.sequence import PENDING, Sequence, SequenceStatus
from quickmoe.engine.step_inputs import prompt_request, row_context
from quickmoe.engine.structured_output import GrammarBackend, MaskWorker
from quickmoe.engine.warmup_steps import StepShapeWarmup
from quickmoe.layers.sampler import DeviceSample, SampledTokens
from quickmoe.startup.gc_pause import HeapFreeze
from quickmoe.tokenizer.base import Tokenizer

__all__ = ["Engine", "EngineStats", "StepOutput", "TokenLogprob"]

logger = logging.getLogger(__name__)

SLOW_LAUNCH_S = 0.5  # queueing a step on the host longer than this is logged: something ran that steps should not


def queues_asynchronously(device: torch.device) -> bool:
    """Whether launching a step on `device` only queues its work (a GPU), rather than running it (a CPU)."""
    return device.type != "cpu"


@dataclass(frozen=True)
class _InFlight:
    """A launched step: its samples (on the device, copy to the host started), the sequence of each sampled row,
    and per chunk the sequence whose prompt log-probabilities it computes (or None)."""

    sample: DeviceSample
    seqs: list[Sequence]
    prompt_seqs: list[Sequence | None]


class Engine:
    """Continuous batching over the runner's paged KV cache (see the module docstring)."""

    def __init__(self, runner, tokenizer: Tokenizer, *, max_num_seqs: int, max_num_batched_tokens: int,
                 long_prefill_token_threshold: int | None = None, enable_prefix_caching: bool = True,
                 seed: int = 0) -> None:
        self.runner = runner
        self.tokenizer = tokenizer
        self.config = runner.config
        self.max_model_len: int = runner.max_model_len
        self.checker = RequestChecker(tokenizer, self.config.vocab_size, self.max_model_len)
        self.blocks = KVBlockManager.for_plan(runner.kv_cache.plan, enable_caching=enable_prefix_caching)
        self.scheduler = Scheduler(self.blocks, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                                   long_prefill_token_threshold=long_prefill_token_threshold)
        self._in_flight: _InFlight | None = None  # the step launched last, its tokens not yet collected
        self.eos_ids = frozenset(self.config.eos_token_ids) | frozenset(tokenizer.eos_token_ids)
        self._inbox = RequestInbox()
        self._seq_ids = itertools.count()
        self._seeds = random.Random(seed)  # the seeds of sampled requests that bring none
        self._masks = MaskWorker()  # structured outputs' token masks
        self.step_warmup = StepShapeWarmup(self.blocks, runner, vocab_size=self.config.vocab_size,
                                           max_num_batched_tokens=max_num_batched_tokens,
                                           max_model_len=self.max_model_len, max_num_seqs=max_num_seqs,
                                           enabled=queues_asynchronously(runner.device))
        self.heap_freeze = HeapFreeze()  # armed by a serving process (startup/gc_pause.py): the last idle piece

    # -- requests (any thread) --------------------------------------------------------------------
    def prompt_ids(self, prompt: str | Seq[int]) -> list[int]:
        """Tokenize (text) or check (ids) a prompt (`RequestChecker.prompt_ids`)."""
        return self.checker.prompt_ids(prompt)

    def add_request(self, request_id: str, prompt: str | Seq[int], params: SamplingParams | None = None) -> int:
        """Queue a request (text or token ids); returns its prompt length. Generation stops at a stop token
        (EOS unless ignore_eos), a stop string, max_tokens, or max_model_len (finish_reason "length")."""
        params = self.checker.params(request_id, params)
        # a tuple of ints, which the collector stops tracking: its full passes while serving (every ~1 s under load)
        # never visit a prompt's tokens, only what grows (outputs)
        ids = tuple(self.checker.prompt_ids(prompt))
        stop_ids = (frozenset() if params.ignore_eos else self.eos_ids) | frozenset(params.stop_token_ids)
        grammar = self.check_structured(params.structured) if params.structured is not None else None
        seqs = []
        for index in range(params.n):
            generator = None
            if not params.greedy:
                seed = params.seed + index if params.seed is not None else self._seeds.randrange(2**62)
                generator = torch.Generator().manual_seed(seed)
            seqs.append(Sequence(seq_id=next(self._seq_ids), request_id=request_id, prompt_ids=ids, params=params,
                                 stop_ids=stop_ids, max_total_tokens=min(self.max_model_len, len(ids) + params.max_tokens),
                                 detokenizer=IncrementalDetokenizer(self.tokenizer, params), generator=generator,
                                 index=index, prompt_logprobs=[None] if params.prompt_logprobs is not None else None,
                                 grammar=self.grammars.state(grammar, params.structured) if grammar else None))
        self._inbox.add(request_id, seqs, hold_samples=self.blocks.enable_caching)
        return len(ids)

    def check_structured(self, spec: StructuredOutput) -> str:
        """The compiled grammar of a structured output; RequestError when it is invalid."""
        return self.checker.structured(spec)

    @property
    def grammars(self) -> GrammarBackend:
        return self.checker.grammars

    def abort(self, request_id: str, index: int | None = None) -> None:
        """End a request (or only its sample `index`) at the next step (finish_reason "abort"), freeing its
        blocks; unknown or finished requests are ignored."""
        self._inbox.abort(request_id, index)

    def has_unfinished(self) -> bool:
        return self._inbox.has_live()

    def live_request_ids(self) -> list[str]:
        """The requests added and not finished."""
        return self._inbox.live_ids()

    def stats(self) -> EngineStats:
        sched = self.scheduler
        return EngineStats(num_running=len(sched.running), num_waiting=len(sched.waiting),
                           kv_cache_usage=self.blocks.usage(), num_preemptions=sched.num_preemptions,
                           num_prefix_queries=sched.num_prefix_queries, num_prefix_hits=sched.num_prefix_hits,
                           num_scheduled_tokens=sched.num_scheduled_tokens,
                           steps=self.runner.step_timer.totals() if self.runner.step_timer.enabled else None)

    def time_steps(self) -> None:
        """Time every step from now on (device time by step kind, the device's idle time between steps, the host's
        queueing time): `stats().steps` then carries the running sums. For a server: cheap, and nothing kept."""
        timer = self.runner.step_timer
        timer.keep, timer.enabled = False, True

    def note_idle(self) -> None:
        """The caller has no work for the engine now (a server waiting for requests): the gap before the next step
        is not the device waiting for the host."""
        self.runner.step_timer.mark_idle()

    # -- the engine loop (one thread) -------------------------------------------------------------
    def idle_work(self) -> bool:
        """One piece of work worth doing while no request runs, so that no step waits for it: compiling the MoE
        kernels of a group of batch sizes (first: the graphs' captures then find theirs compiled), capturing a
        CUDA graph the runner left for later (decode steps', then prompt steps'), or a warm-up step of a prefill's
        shape (warmup_steps.py); last, where armed, the heap's collection and freeze (`HeapFreeze`).
        False when there is none. Call on the step thread, between steps, when no request is unfinished (a step
        still in flight then only computes tokens that are dropped; nothing here samples)."""
        return (self.runner.warm_next_moe_kernels() or self.runner.capture_deferred_graph()
                or self.step_warmup.warm_next() or self.heap_freeze.run_once())

    def finish_idle_work(self) -> int:
        """Do all of `idle_work` now (before serving, or before a timed run); returns the pieces done."""
        pieces = 0
        while self.idle_work():
            pieces += 1
        return pieces

    def step(self) -> list[StepOutput]:
        """Run one model step; returns an output for every request that gained tokens or ended.

        Pipelined: this call schedules and launches step N+1 (whose decode inputs may be step N's tokens, still
        on the device), and only then waits for step N's tokens and runs the stop checks, the detokenizer and
        the outputs, while the device computes step N+1. So each request's outputs come one call later, and a
        request that step N finishes may compute one more token, which is dropped."""
        outputs = self._take_inbox()
        if self._in_flight is not None and self._must_collect_first():
            previous, self._in_flight = self._in_flight, None
            outputs.extend(self._collect(previous))
        sched = self.scheduler.schedule()
        launched = self._launch(sched) if sched.chunks else None
        previous, self._in_flight = self._in_flight, launched
        if previous is not None:
            outputs.extend(self._collect(previous))
        return outputs

    def _must_collect_first(self) -> bool:
        """The pipelining rule (module docstring): a running request that needs its previous token on the host
        has one in flight."""
        return any(seq.num_pending and seq.params.needs_host_state for seq in self.scheduler.running)

    def _launch(self, sched) -> "_InFlight | None":
        """Queue the step on the device; its sampled outputs become PENDING tokens of their sequences."""
        chunks = sched.chunks
        sampling = [i for i, c in enumerate(chunks) if c.samples]  # before step_done moves num_computed
        seqs = [chunks[i].seq for i in sampling]
        for c in chunks:
            assert c.seq.num_pending <= 1 and (c.seq.num_pending == 0 or c.num_tokens == 1), "one step in flight"
        contexts = [row_context(s) for s in seqs]
        prompt = [prompt_request(c) for c in chunks]
        previous = self._in_flight.sample if self._in_flight is not None else None  # the step launched before
        bitmask = self._masks.submit(seqs, previous)  # computed while the device runs the forward
        started = time.perf_counter()
        sample = self.runner.execute(
            [c.seq.token_ids(c.start, c.start + c.num_tokens) for c in chunks], [c.start for c in chunks],
            self.blocks.step_block_tables([c.seq.seq_id for c in chunks]),
            prev_rows=[c.seq.pending_row if c.seq.num_pending else -1 for c in chunks],
            sample_rows=sampling, params=[s.params for s in seqs], generators=[s.generator for s in seqs],
            contexts=contexts if any(c is not None for c in contexts) else None, bitmask=bitmask,
            prompt_logprobs=prompt if any(r is not None for r in prompt) else None)
        self._note_slow_launch(time.perf_counter() - started, chunks)
        self.scheduler.step_done(sched)
        for row, seq in enumerate(seqs):
            seq.output_ids.append(PENDING)
            seq.num_pending += 1
            seq.pending_row = row
        prompt_seqs = [c.seq if r is not None else None for c, r in zip(chunks, prompt)]
        return _InFlight(sample, seqs, prompt_seqs) if sample is not None else None

    def _note_slow_launch(self, seconds: float, chunks) -> None:
        """On a GPU, queueing a step takes milliseconds, and one that took long stalled every running request for
        that long (a kernel compiled or a CUDA graph captured at its first use, typically on an empty kernel cache):
        say so, with the step's size. (On a CPU queueing a step is running it.)"""
        if seconds > SLOW_LAUNCH_S and queues_asynchronously(self.runner.device):
            logger.warning("a step of %d tokens over %d sequences took %.2f s to queue on the host (every running "
                           "request waited): kernels compiled or a CUDA graph captured at first use? A warm kernel "
                           "cache (QUICKMOE_CACHE_DIR) avoids it", sum(c.num_tokens for c in chunks), len(chunks),
                           seconds)

    def _collect(self, step: "_InFlight") -> list[StepOutput]:
        """Wait for a launched step's tokens and hand them to their sequences (finished ones drop theirs)."""
        sampled = step.sample.to_host()
        for seq, values in zip(step.prompt_seqs, sampled.prompt or ()):
            if seq is not None and values is not None:
                for logprob, top in values:
                    position = len(seq.prompt_logprobs)
                    seq.prompt_logprobs.append(TokenLogprob(seq.prompt_ids[position], logprob, tuple(top)))
        return [self._append(seq, sampled, row) for row, seq in enumerate(step.seqs) if not seq.finished]

    def _take_inbox(self) -> list[StepOutput]:
        ready, aborted = self._inbox.take()
        for seq in ready:
            self.scheduler.add(seq)
        outputs = []
        for seq in aborted:
            self.scheduler.finish(seq, "abort")
            outputs.append(self._finished(seq, "abort", [], None, ""))
        return outputs

    def _append(self, seq: Sequence, sampled: SampledTokens, row: int) -> StepOutput:
        """Resolve `seq`'s oldest pending output to its sampled token and decide whether it finished."""
        token = sampled.token_ids[row]
        index = seq.num_resolved
        assert seq.num_pending > 0 and seq.output_ids[index] == PENDING
        seq.output_ids[index] = token
        seq.num_pending -= 1
        logprobs = None
        if seq.params.logprobs is not None:
            top = sampled.top_logprobs[row] or []
            logprobs = [TokenLogprob(token, sampled.logprobs[row], tuple(top))]
        reason, stop_reason, text = None, None, ""
        if seq.grammar is not None:  # (done already if the next step's mask job came first)
            seq.grammar.advance_at(index, token, seq.stop_ids)
        if token in seq.stop_ids:  # the stop token's text is not part of the output
            reason, stop_reason = "stop", token
        else:
            text = seq.detokenizer.add([token])
            if seq.detokenizer.stop_string is not None:
                reason, stop_reason = "stop", seq.detokenizer.stop_string
            elif len(seq.prompt_ids) + index + 1 >= seq.max_total_tokens:
                reason = "length"
        prompt_logprobs = seq.prompt_logprobs if index == 0 else None
        scheduled = seq.first_scheduled_time if index == 0 else None
        if reason is None:
            return StepOutput(seq.request_id, [token], text, logprobs, False, None, None, len(seq.prompt_ids),
                              index + 1, seq.index, scheduled, prompt_logprobs)
        self.scheduler.finish(seq, reason)
        return self._finished(seq, reason, [token], logprobs, text, stop_reason, prompt_logprobs, scheduled)

    def _finished(self, seq: Sequence, reason: str, tokens: list[int], logprobs: list[TokenLogprob] | None,
                  text: str, stop_reason: int | str | None = None,
                  prompt_logprobs: list[TokenLogprob | None] | None = None,
                  scheduled: float | None = None) -> StepOutput:
        assert seq.status is SequenceStatus.FINISHED
        del seq.output_ids[seq.num_resolved:]  # outputs computed past the end (pipelining) are dropped
        seq.num_pending = 0
        seq.stop_reason = stop_reason
        if reason != "abort":
            text += seq.detokenizer.finish()
        self._inbox.retire(seq)
        return StepOutput(seq.request_id, tokens, text, logprobs, True, reason, stop_reason, len(seq.prompt_ids),
                          len(seq.output_ids), seq.index, scheduled, prompt_logprobs)

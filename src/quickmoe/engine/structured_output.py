"""Structured output (JSON object, JSON schema, regex, choice, grammar) as a token mask, through llguidance.

`GrammarBackend` compiles a request's `StructuredOutput` once against the model's vocabulary (an LLTokenizer
built on first use from the tokenizer's byte pieces, ~1 s) and makes one `GrammarState` per sample. Before a
step samples a constrained sequence, `compute_masks` fills an int32 bitmask [S, ceil(V / 32)] (bit j of word w
allows token 32 w + j; unconstrained rows allow everything; the rows in parallel on llguidance's thread pool) from
a worker thread, while the device runs the forward; the sampler waits for it only when it needs it. The allowed
tokens are the grammar's, plus the sequence's stop tokens once the grammar accepts (only those once it can take nothing more), so the output is
complete and valid when the request stops on its own. Each sampled token advances the state once, by its output
index (`advance_at`), whichever comes first: the engine collecting the step, or the next step's mask job.

A state may wait for a trigger before it constrains anything (`after_final_channel`: harmony's
`<|channel|>final ... <|message|>` header, so gpt-oss reasons freely and its answer follows the grammar).
The mask needs the previous token on the host, but the forward does not: the engine launches step N+1's forward
before step N's tokens are known, and the mask job (`compute_masks_after`) waits for them on the worker thread,
advances the states, then fills the mask while the device runs the forward; only the sampler waits for it. So
structured requests do not hold the pipeline up (penalties still do: SamplingParams.needs_host_state).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from quickmoe.engine.sampling_params import StructuredOutput
from quickmoe.errors import RequestError
from quickmoe.tokenizer.base import Tokenizer
from quickmoe.tokenizer.vocab import CHANNEL, MESSAGE, START

__all__ = ["GrammarBackend", "GrammarState", "MaskWorker", "PendingToken", "compute_masks",
           "compute_masks_after"]


class _Pieces:
    """The tokenizer as llguidance's TokenizerWrapper reads it."""

    def __init__(self, tokenizer: Tokenizer, vocab_size: int) -> None:
        self._tokenizer = tokenizer
        # llguidance's own end token (its bit is cleared unless it is a stop token of the request)
        self.eos_token_id = next((t for t in tokenizer.eos_token_ids if t < vocab_size), vocab_size - 1)
        self.bos_token_id = None
        self.tokens = []
        unknown = []
        for i in range(vocab_size):
            try:
                self.tokens.append(tokenizer.decode_bytes([i]))
            except Exception:  # noqa: BLE001 (ids the vocabulary leaves unassigned: any decoding failure)
                self.tokens.append(f"<|unassigned_{i}|>".encode())
                unknown.append(i)
        self.special_token_ids = sorted(set(tokenizer.special_token_ids) | set(unknown))

    def __call__(self, text: bytes | str) -> list[int]:
        return self._tokenizer.encode(text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text)


class GrammarBackend:
    """llguidance over one tokenizer and vocabulary size (the logits' width)."""

    def __init__(self, tokenizer: Tokenizer, vocab_size: int) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.words = (vocab_size + 31) // 32
        self._lltokenizer = None
        self._executor = None
        self._lock = threading.Lock()
        self._compiled: dict[tuple[str, str], str] = {}

    @property
    def executor(self):
        """llguidance's thread pool for the masks of a step's rows (made on first use)."""
        with self._lock:
            if self._executor is None:
                import llguidance

                self._executor = llguidance.LLExecutor()
            return self._executor

    @property
    def lltokenizer(self):
        with self._lock:
            if self._lltokenizer is None:
                import llguidance

                wrapper = llguidance.TokenizerWrapper(_Pieces(self.tokenizer, self.vocab_size))
                self._lltokenizer = llguidance.LLTokenizer(wrapper, n_vocab=self.vocab_size)
            return self._lltokenizer

    def compile(self, spec: StructuredOutput) -> str:
        """The llguidance grammar of `spec`, validated against the vocabulary; RequestError when it is invalid
        (naming what llguidance found). The last 256 are kept (the server checks a request before queueing it)."""
        key = (spec.kind, spec.spec)
        with self._lock:
            if key in self._compiled:
                return self._compiled[key]
        grammar = self._compile(spec)
        with self._lock:
            self._compiled[key] = grammar
            while len(self._compiled) > 256:
                self._compiled.pop(next(iter(self._compiled)))
        return grammar

    def _compile(self, spec: StructuredOutput) -> str:
        import llguidance

        if spec.kind == "json_schema":
            try:
                schema = json.loads(spec.spec)
            except ValueError as exc:
                raise RequestError(f"structured output (json_schema): not JSON ({exc})") from None
        if spec.kind == "json_object":
            fmt, text = "json_schema", json.dumps({"type": "object", "x-guidance": {"whitespace_flexible": False}})
        elif spec.kind == "json_schema":
            if isinstance(schema, dict):
                schema = {**schema, "x-guidance": {"whitespace_flexible": False, **schema.get("x-guidance", {})}}
            fmt, text = "json_schema", json.dumps(schema)
        else:
            fmt, text = {"regex": "regex", "choice": "choice", "grammar": "grammar"}[spec.kind], spec.spec
        try:
            grammar = llguidance.grammar_from(fmt, text)
        except (ValueError, TypeError, RuntimeError) as exc:
            raise RequestError(f"structured output ({spec.kind}): {exc}") from None
        error = llguidance.LLMatcher.validate_grammar(grammar, self.lltokenizer)
        if error:
            raise RequestError(f"structured output ({spec.kind}): {error[:300]}")
        return grammar

    def state(self, grammar: str, spec: StructuredOutput) -> GrammarState:
        import llguidance

        matcher = llguidance.LLMatcher(self.lltokenizer, grammar, log_level=0)
        return GrammarState(matcher, self, active=not spec.after_final_channel)


class GrammarState:
    """One sample's place in its grammar."""

    def __init__(self, matcher: Any, backend: GrammarBackend, *, active: bool) -> None:
        self.matcher = matcher
        self.backend = backend
        self.active = active
        self.position = 0  # output tokens accounted for (consumed, or stop tokens passed over)
        self._header: list[int] = []  # tokens since the last <|start|> / <|channel|> (trigger search)

    def advance_at(self, index: int, token: int, stop_ids: Sequence[int] | frozenset[int]) -> None:
        """Output `index` of the sample is `token`: consumed once (a second call for the same index does
        nothing), stop tokens passed over. Outputs arrive in order."""
        if index < self.position:
            return
        assert index == self.position, f"grammar at output {self.position}, given output {index}"
        self.position += 1
        if token not in stop_ids:
            self._advance(token)

    def _advance(self, token: int) -> None:
        if self.active:
            self.matcher.consume_token(token)  # a token outside the grammar puts it in its error state
            return
        if token in (START, CHANNEL):
            self._header = []
        elif token == MESSAGE:
            self.active = "final" in self.backend.tokenizer.decode(self._header)
            self._header = []
        else:
            self._header.append(token)

    @property
    def needs_mask(self) -> bool:
        """Whether llguidance computes this row's mask (active, neither in error nor stopped)."""
        return self.active and not (self.matcher.is_error() or self.matcher.is_stopped())

    def finish_row(self, row: torch.Tensor, stop_ids: Sequence[int]) -> None:
        """`row` (int32 [words]) holds llguidance's mask where `needs_mask`, else all ones: the grammar's end
        token cleared unless it stops the request, nothing allowed once the grammar is done or broken, and the
        request's stop tokens allowed once it accepts."""
        if not self.active:
            return
        matcher = self.matcher
        if matcher.is_error() or matcher.is_stopped():
            row.zero_()
        else:
            eos = self.backend.lltokenizer.eos_token
            if eos not in stop_ids:
                _set_bit(row, eos, False)
        if matcher.is_error() or matcher.is_accepting():
            for t in stop_ids:
                _set_bit(row, t, True)


def _set_bit(row: torch.Tensor, token: int, value: bool) -> None:
    word, bit = divmod(token, 32)
    if word >= row.numel():
        return
    mask = (1 << bit) if bit < 31 else -(1 << 31)  # bit 31 of an int32 is its sign
    row[word] = (int(row[word]) | mask) if value else (int(row[word]) & ~mask)


def compute_masks(states: Sequence[GrammarState | None], stop_ids: Sequence[Sequence[int]],
                  words: int) -> torch.Tensor:
    """The bitmask [S, words] int32 of one step's sampled rows (see the module docstring)."""
    bitmask = torch.full((len(states), words), -1, dtype=torch.int32)
    rows = [(state.matcher, i) for i, state in enumerate(states) if state is not None and state.needs_mask]
    if rows:  # every row at once, on llguidance's own threads (one row's mask can take a millisecond)
        backend = next(state.backend for state in states if state is not None)
        backend.executor.unsafe_compute_mask_ptr(rows, bitmask.data_ptr(), words * bitmask.element_size(),
                                                 len(states))
    for i, (state, stops) in enumerate(zip(states, stop_ids)):
        if state is not None:
            state.finish_row(bitmask[i], stops)
    return bitmask


@dataclass(frozen=True)
class PendingToken:
    """A sampled row's token still in flight: output `index` of its sample, row `row` of the previous step."""

    index: int
    row: int


def compute_masks_after(previous: Any, pending: Sequence[PendingToken | None], states: Sequence[GrammarState | None],
                        stop_ids: Sequence[Sequence[int]], words: int) -> torch.Tensor:
    """`compute_masks` once the previous step's tokens are known: waits for `previous` (a DeviceSample, or None
    when nothing is pending) and advances each state with its pending token first (worker thread)."""
    if previous is not None and any(p is not None and s is not None for p, s in zip(pending, states)):
        token_ids = previous.to_host().token_ids
        for state, wait, stops in zip(states, pending, stop_ids):
            if state is not None and wait is not None:
                state.advance_at(wait.index, token_ids[wait.row], stops)
    return compute_masks(states, stop_ids, words)


class MaskWorker:
    """A step's token masks computed on a worker thread (started at first use) while the device runs the step's
    forward: only the sampler waits for them (`compute_masks_after`)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, seqs: Sequence[Any], previous: Any) -> Future | None:
        """The bitmask job of a step's sampled sequences (engine `Sequence`s), or None when none is constrained.
        A constrained row whose previous token is still in flight (`previous`: the DeviceSample of the step
        launched before, or None) waits for it and advances its grammar first."""
        states = [s.grammar for s in seqs]
        constrained = next((state for state in states if state is not None), None)
        if constrained is None:
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quickmoe-grammar")
        pending = [PendingToken(s.num_resolved, s.pending_row) if s.grammar is not None and s.num_pending else None
                   for s in seqs]
        assert previous is not None or not any(pending), "a pending token belongs to the step in flight"
        return self._pool.submit(compute_masks_after, previous, pending, states, [s.stop_ids for s in seqs],
                                 constrained.backend.words)

"""RequestChecker: what a request must satisfy before an engine takes it (its prompt within the vocabulary and the
context, its logit bias within the vocabulary, its grammar compiling), with no model attached. The engine checks
every request with one; a server whose engine runs in another process checks with its own, so a bad request is
answered 400 at once and never crosses to the engine. Torch-free until a request brings a grammar."""

from __future__ import annotations

import numbers
import threading
from collections.abc import Sequence as Seq

from typing import TYPE_CHECKING

from quickmoe.engine.sampling_params import SamplingParams, StructuredOutput
from quickmoe.errors import RequestError

if TYPE_CHECKING:
    from quickmoe.engine.structured_output import GrammarBackend
    from quickmoe.tokenizer.base import Tokenizer

__all__ = ["RequestChecker"]


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class RequestChecker:
    """The checks of one model: its tokenizer, vocabulary size (the logits' width) and max_model_len."""

    def __init__(self, tokenizer: Tokenizer, vocab_size: int, max_model_len: int) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.max_model_len = max_model_len
        self._grammars: GrammarBackend | None = None  # structured output, made at its first request
        self._lock = threading.Lock()

    @property
    def grammars(self) -> GrammarBackend:
        """The grammar engine (imported and made at the first structured request: it needs torch)."""
        with self._lock:
            if self._grammars is None:
                from quickmoe.engine.structured_output import GrammarBackend

                self._grammars = GrammarBackend(self.tokenizer, self.vocab_size)
            return self._grammars

    def prompt_ids(self, prompt: str | Seq[int]) -> list[int]:
        """Tokenize (text) or check (ids) a prompt: RequestError when empty, out of the vocabulary, or leaving
        no room for one generated token within max_model_len."""
        if isinstance(prompt, str):
            ids = self.tokenizer.encode(prompt)
        elif type(prompt) in (list, tuple) and set(map(type, prompt)) <= {int}:
            # the common cases (a list from JSON, a tuple from LLM.generate and bench generate), checked in C: a
            # batch of 256 prompts of 1,000 ids took 0.4 s through the general path's per-id ABC checks below (bool,
            # a subclass of int, is not `int` and goes there)
            ids = list(prompt)
        elif isinstance(prompt, (bytes, bytearray)) or not isinstance(prompt, Seq) \
                or any(isinstance(t, bool) or not isinstance(t, numbers.Integral) for t in prompt):
            raise RequestError(f"prompt {_short(prompt)}: expected a string or a list of integer token ids")
        else:
            ids = [int(t) for t in prompt]
        if not ids:
            raise RequestError("empty prompt (expected at least one token)")
        if min(ids) < 0 or max(ids) >= self.vocab_size:
            bad = next(t for t in ids if not 0 <= t < self.vocab_size)
            raise RequestError(f"token id {bad} is outside the model's vocabulary [0, {self.vocab_size})")
        if len(ids) >= self.max_model_len:
            raise RequestError(f"{len(ids)} tokens leave no room to generate within max_model_len="
                               f"{self.max_model_len}")
        return ids

    def params(self, request_id: str, params: SamplingParams | None) -> SamplingParams:
        """The request's sampling parameters (the defaults for None), checked against the vocabulary."""
        params = params if params is not None else SamplingParams()
        if not isinstance(params, SamplingParams):
            raise RequestError(f"sampling params of {request_id!r}: expected SamplingParams, got "
                               f"{type(params).__name__}")
        checked = (("logit_bias", [t for t, _ in params.logit_bias]), ("stop_token_ids", params.stop_token_ids))
        for field, ids in checked:
            bad = [t for t in ids if t >= self.vocab_size]
            if bad:  # ids the model cannot produce: a bias or a stop there would silently do nothing
                raise RequestError(f"sampling parameter '{field}': token id {bad[0]} is outside the model's "
                                   f"vocabulary [0, {self.vocab_size})")
        return params

    def structured(self, spec: StructuredOutput) -> str:
        """The compiled grammar of a structured output; RequestError when it is invalid."""
        return self.grammars.compile(spec)

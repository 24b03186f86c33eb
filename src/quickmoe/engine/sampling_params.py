"""Per-request sampling parameters, validated at construction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from quickmoe.engine_config import SEED_RANGE
from quickmoe.errors import RequestError

__all__ = ["GREEDY_BELOW", "MAX_LOGPROBS", "MAX_N", "SEED_RANGE", "STRUCTURED_KINDS", "SamplingParams",
           "StructuredOutput"]

MAX_LOGPROBS = 20  # the most alternatives a request may ask for (`logprobs`), as OpenAI's API
MAX_N = 128  # the most parallel samples of one request (`n`)
MAX_LOGIT_BIAS = 100.0  # |bias| allowed per token, as OpenAI's API
# Temperatures below this are greedy: logits / T would overflow float32 (T below ~1e-38 even underflows to 0
# in float32 and turns every row into NaN), and any T this small picks the argmax anyway.
GREEDY_BELOW = 1e-5


def _is_int(value: object) -> bool:
    """True for an int that is not a bool (bools are ints in Python, never valid counts here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise RequestError(f"sampling parameter {name!r} = {value!r}: expected true or false")


STRUCTURED_KINDS = ("json_object", "json_schema", "regex", "choice", "grammar")


@dataclass(frozen=True)
class StructuredOutput:
    """What the output must match: `kind` json_object (any JSON object; spec ignored), json_schema (spec: the
    schema as JSON text), regex, choice (spec: a JSON list of strings) or grammar (Lark or GBNF). With
    `after_final_channel` the constraint starts after harmony's final-channel header (a chat reply's answer)."""

    kind: str
    spec: str = ""
    after_final_channel: bool = False

    def __post_init__(self) -> None:
        if self.kind not in STRUCTURED_KINDS:
            raise RequestError(f"structured output kind {self.kind!r}: expected one of {list(STRUCTURED_KINDS)}")
        if not isinstance(self.spec, str) or (self.kind != "json_object" and not self.spec):
            raise RequestError(f"structured output ({self.kind}): expected a non-empty specification")
        _check_bool("after_final_channel", self.after_final_channel)


def _check_number(name: str, value: object, lo: float, hi: float, *, lo_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (lo < value if lo_open else lo <= value) \
            or not value <= hi:
        raise RequestError(f"sampling parameter {name!r} = {value!r}: expected a number in "
                           f"{'(' if lo_open else '['}{lo:g}, {hi:g}]")


def _normalise_logit_bias(bias: object) -> tuple[tuple[int, float], ...]:
    """{token id: bias} (or (id, bias) pairs) as sorted (id, bias) pairs; ids may be integer strings (JSON keys)."""
    items = bias.items() if isinstance(bias, dict) else bias
    if isinstance(items, (str, bytes)) or not isinstance(items, (Sequence, type({}.items()))):
        raise RequestError(f"sampling parameter 'logit_bias' = {bias!r:.80}: expected {{token id: bias}}")
    out: dict[int, float] = {}
    for pair in items:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise RequestError(f"sampling parameter 'logit_bias' = {bias!r:.80}: expected {{token id: bias}}")
        key, value = pair
        if isinstance(key, str) and key.strip().isdigit():
            key = int(key)
        if not _is_int(key) or key < 0:
            raise RequestError(f"sampling parameter 'logit_bias' key {key!r}: expected a token id >= 0")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not -MAX_LOGIT_BIAS <= value <= MAX_LOGIT_BIAS:
            raise RequestError(f"sampling parameter 'logit_bias' [{key}] = {value!r}: expected a number in "
                               f"[-{MAX_LOGIT_BIAS:g}, {MAX_LOGIT_BIAS:g}]")
        out[key] = float(value)
    return tuple(sorted(out.items()))


def _normalise_stop(stop: object) -> tuple[str, ...]:
    """`stop` as a tuple of non-empty strings: one str becomes a 1-tuple."""
    if isinstance(stop, str):
        stop = (stop,)
    if not isinstance(stop, Sequence) or any(not isinstance(s, str) or not s for s in stop):
        raise RequestError(f"sampling parameter 'stop' = {stop!r}: expected a non-empty string or a list of "
                           "non-empty strings")
    return tuple(stop)


@dataclass(frozen=True)
class SamplingParams:
    """How to pick the next tokens of one request, and how to turn them into text.

    Token choice: temperature 0, or any temperature below GREEDY_BELOW (1e-5), means greedy (argmax of the
    raw logits). Otherwise the next token is
    drawn from softmax(logits / temperature) restricted to the `top_k` most likely tokens (0 or -1:
    no limit; -1 is normalised to 0), then to the smallest set of most likely of those whose
    probability (renormalised over the top-k) reaches `top_p`. `seed` makes a request's sampling
    reproducible whatever else is in the batch.

    Stopping: generation stops at an EOS token (unless ignore_eos), at a token of `stop_token_ids`,
    after `max_tokens` tokens, or when the text contains one of the `stop` strings (a single str is
    taken as a 1-tuple). The text then ends just before the stop string, or just after it with
    `include_stop_str_in_output`.

    Output: `skip_special_tokens` leaves special tokens (<|channel|>, ...) out of the text.
    `logprobs` None returns no log-probabilities; 0 the chosen token's; n in 1..20 also the n most
    likely tokens with theirs (all from the raw logits, before temperature, top-k and top-p).
    `prompt_logprobs` (None, or 0..20 alternatives) returns the log-probability of every prompt token given
    the tokens before it (the first one has none); such a request never reuses cached prefix blocks.

    Logits processing (vLLM's order and definitions), before greedy or sampled choice:
    `min_tokens`: the stop token ids (EOS, stop_token_ids) cannot be chosen before this many outputs (stop
    strings still apply). `logit_bias` {token id: bias in [-100, 100]} is added to the logits.
    `repetition_penalty` r (> 0, 1 = off): a token seen in the prompt or the outputs has its logit divided by r
    when positive, multiplied by r otherwise. `frequency_penalty` f and `presence_penalty` p (in [-2, 2]):
    logit -= f * (times the token was generated) + p * (1 if it was generated). Then temperature, and
    `min_p` (in [0, 1]): tokens of probability below min_p x the most likely one's are dropped before
    top-k and top-p. `n` (1..128): independent samples of the prompt (seed s: sample i draws with s + i).
    `structured` (StructuredOutput): only tokens that keep the output matching it are chosen.
    """

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)
    ignore_eos: bool = False
    # fields added later come last, so that positional construction keeps its meaning
    top_k: int = 0
    stop: tuple[str, ...] = ()
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    logprobs: int | None = None
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_p: float = 0.0
    min_tokens: int = 0
    logit_bias: tuple[tuple[int, float], ...] = ()
    prompt_logprobs: int | None = None
    structured: StructuredOutput | None = None

    def __post_init__(self) -> None:
        if not _is_int(self.max_tokens) or self.max_tokens < 1:
            raise RequestError(f"sampling parameter 'max_tokens' = {self.max_tokens!r}: expected an integer >= 1")
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) \
                or not 0 <= self.temperature < float("inf"):
            raise RequestError(f"sampling parameter 'temperature' = {self.temperature!r}: expected a number >= 0")
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise RequestError(f"sampling parameter 'top_p' = {self.top_p!r}: expected a number in (0, 1]")
        if not _is_int(self.top_k) or not (self.top_k >= 1 or self.top_k in (0, -1)):
            raise RequestError(f"sampling parameter 'top_k' = {self.top_k!r}: expected an integer >= 1, "
                               "or 0 or -1 for no limit")
        object.__setattr__(self, "top_k", max(self.top_k, 0))
        if self.seed is not None and (not _is_int(self.seed) or not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]):
            raise RequestError(f"sampling parameter 'seed' = {self.seed!r}: expected None or an integer in "
                               f"[{SEED_RANGE[0]}, {SEED_RANGE[1]}]")
        ids = self.stop_token_ids
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence) or any(not _is_int(t) or t < 0 for t in ids):
            raise RequestError(f"sampling parameter 'stop_token_ids' = {self.stop_token_ids!r}: "
                               "expected non-negative integers")
        object.__setattr__(self, "stop_token_ids", tuple(ids))
        object.__setattr__(self, "stop", _normalise_stop(self.stop))
        _check_bool("include_stop_str_in_output", self.include_stop_str_in_output)
        _check_bool("ignore_eos", self.ignore_eos)
        _check_bool("skip_special_tokens", self.skip_special_tokens)
        if self.logprobs is not None and (not _is_int(self.logprobs) or not 0 <= self.logprobs <= MAX_LOGPROBS):
            raise RequestError(f"sampling parameter 'logprobs' = {self.logprobs!r}: expected None or an integer "
                               f"in [0, {MAX_LOGPROBS}]")
        if self.prompt_logprobs is not None and (not _is_int(self.prompt_logprobs)
                                                 or not 0 <= self.prompt_logprobs <= MAX_LOGPROBS):
            raise RequestError(f"sampling parameter 'prompt_logprobs' = {self.prompt_logprobs!r}: expected None or "
                               f"an integer in [0, {MAX_LOGPROBS}]")
        if not _is_int(self.n) or not 1 <= self.n <= MAX_N:
            raise RequestError(f"sampling parameter 'n' = {self.n!r}: expected an integer in [1, {MAX_N}]")
        _check_number("presence_penalty", self.presence_penalty, -2.0, 2.0)
        _check_number("frequency_penalty", self.frequency_penalty, -2.0, 2.0)
        _check_number("repetition_penalty", self.repetition_penalty, 0.0, float("inf"), lo_open=True)
        if self.repetition_penalty == float("inf"):
            raise RequestError(f"sampling parameter 'repetition_penalty' = {self.repetition_penalty!r}: expected a "
                               "finite number > 0")
        _check_number("min_p", self.min_p, 0.0, 1.0)
        if not _is_int(self.min_tokens) or not 0 <= self.min_tokens <= self.max_tokens:
            raise RequestError(f"sampling parameter 'min_tokens' = {self.min_tokens!r}: expected an integer in "
                               f"[0, max_tokens = {self.max_tokens}]")
        object.__setattr__(self, "logit_bias", _normalise_logit_bias(self.logit_bias))
        if self.structured is not None and not isinstance(self.structured, StructuredOutput):
            raise RequestError(f"sampling parameter 'structured' = {self.structured!r:.60}: expected None or a "
                               "StructuredOutput")

    @property
    def greedy(self) -> bool:
        """Whether the next token is the argmax of the logits (temperature below GREEDY_BELOW, 0 included): the
        sampler never divides by such a temperature."""
        return self.temperature < GREEDY_BELOW

    @property
    def penalized(self) -> bool:
        """Whether a penalty over the request's tokens applies (they must then be known when it samples)."""
        return self.presence_penalty != 0 or self.frequency_penalty != 0 or self.repetition_penalty != 1

    @property
    def needs_host_state(self) -> bool:
        """Whether sampling the next token needs the previous one on the host before the step is launched
        (penalties over the tokens): the engine then launches a step holding this request only after the
        previous step's tokens are collected. (A structured output's mask needs it too, but only by the time the
        sampler runs: its job waits for it on a worker thread, engine/structured_output.py.)"""
        return self.penalized

"""From an OpenAI request to the engine's SamplingParams: defaults, the context-length check, and the engine's
own validation errors turned into 400s naming the request's field."""

from __future__ import annotations

import re

from quickmoe.engine.sampling_params import SamplingParams, StructuredOutput
from quickmoe.errors import RequestError
from quickmoe.server.api_errors import APIError
from quickmoe.server.config import SamplingDefaults
from quickmoe.server.protocol import ChatCompletionRequest, CompletionRequest

__all__ = ["max_tokens_for", "prompt_error", "sampling_params"]

_FIELD_IN_MESSAGE = re.compile(r"sampling parameter '(\w+)'")


COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's and vLLM's default on /v1/completions


def max_tokens_for(requested: int | None, field: str, prompt_len: int, max_model_len: int,
                   default: int | None = None) -> int:
    """The tokens a request may generate: `requested`, else `default` or what the context leaves; 400
    (context_length_exceeded, naming `field`) when the request asks for more than the context leaves."""
    room = max_model_len - prompt_len
    if requested is None:
        return room if default is None else min(default, room)
    if requested > room:
        raise APIError(400, f"{field} = {requested} does not fit: the prompt has {prompt_len} tokens and the "
                       f"model's context is {max_model_len} tokens, which leaves {room} for the completion",
                       param=field, code="context_length_exceeded")
    return requested


def sampling_params(req: CompletionRequest | ChatCompletionRequest, *, prompt_len: int, max_model_len: int,
                    vocab_size: int, extra_stop_token_ids: tuple[int, ...] = (),
                    harmony_chat: bool = False, defaults: SamplingDefaults | None = None) -> SamplingParams:
    """The engine's parameters for `req`. Chat requests match their stop strings in the server (on the final
    channel's text), so none are passed to the engine for them."""
    chat = isinstance(req, ChatCompletionRequest)
    for field, ids in (("logit_bias", [int(t) for t in req.logit_bias or {}]), ("stop_token_ids", req.stop_token_ids)):
        outside = [t for t in ids or () if t >= vocab_size]  # (both are >= 0 by the schema)
        if outside:  # a stop id the model cannot produce would never stop anything: refused, not ignored
            raise APIError(400, f"{field}: token id {outside[0]} is outside the model's vocabulary [0, {vocab_size})",
                           param=field, code="invalid_value")
    limit_field = ("max_completion_tokens" if chat and req.max_completion_tokens is not None else "max_tokens")
    d = defaults if defaults is not None else SamplingDefaults()
    default_max = d.max_tokens if d.max_tokens else None if chat else COMPLETIONS_DEFAULT_MAX_TOKENS
    max_tokens = max_tokens_for(req.completion_tokens_limit if chat else req.max_tokens, limit_field, prompt_len,
                                max_model_len, default_max)
    max_tokens = max(max_tokens, 1)  # echo with max_tokens 0: one token is generated and left out of the reply
    temperature = req.temperature if req.temperature is not None else 1.0 if d.temperature is None else d.temperature
    top_k = req.top_k if req.top_k is not None else d.top_k or 0
    top_k = 0 if top_k >= vocab_size else top_k
    prompt_logprobs = req.prompt_logprobs
    if chat:
        logprobs = (req.top_logprobs or 0) if req.logprobs else None
    else:
        logprobs = req.logprobs
        if req.echo and logprobs is not None:  # the echoed prompt's tokens carry logprobs too
            prompt_logprobs = max(logprobs, prompt_logprobs or 0)
    fields = dict(max_tokens=max_tokens, temperature=temperature,
                  top_p=req.top_p if req.top_p is not None else d.top_p or 1.0, top_k=top_k, seed=req.seed,
                  stop=() if chat else req.stop_strings,
                  stop_token_ids=tuple(req.stop_token_ids or ()) + tuple(extra_stop_token_ids),
                  ignore_eos=req.ignore_eos, include_stop_str_in_output=req.include_stop_str_in_output,
                  skip_special_tokens=False if chat else req.skip_special_tokens, logprobs=logprobs, n=req.n,
                  presence_penalty=req.presence_penalty or 0.0, frequency_penalty=req.frequency_penalty or 0.0,
                  repetition_penalty=req.repetition_penalty if req.repetition_penalty is not None
                  else d.repetition_penalty or 1.0, min_p=req.min_p if req.min_p is not None else d.min_p or 0.0,
                  min_tokens=req.min_tokens, logit_bias=req.logit_bias or (),
                  prompt_logprobs=prompt_logprobs, structured=_structured(req, harmony_chat))
    try:
        return SamplingParams(**fields)
    except RequestError as exc:
        match = _FIELD_IN_MESSAGE.search(str(exc))
        name = match.group(1) if match else None
        param = {"max_tokens": limit_field, "logprobs": "top_logprobs" if chat else "logprobs"}.get(name, name)
        raise APIError(400, str(exc), param=param, code="invalid_value") from None


def _structured(req: CompletionRequest | ChatCompletionRequest, harmony_chat: bool) -> StructuredOutput | None:
    """The output constraint asked for (a harmony chat constrains the final channel's answer only)."""
    asked = req.structured()
    if asked is None:
        return None
    try:
        return StructuredOutput(asked[0], asked[1], after_final_channel=harmony_chat)
    except RequestError as exc:
        raise APIError(400, str(exc), param=req.structured_field, code="invalid_value") from None


def prompt_error(exc: RequestError | Exception, field: str) -> APIError:
    """A prompt the engine refused (empty, ids out of the vocabulary, no room left in the context)."""
    text = str(exc)
    code = "context_length_exceeded" if "max_model_len" in text else "invalid_value"
    return APIError(400, f"{field}: {text}", param=field, code=code)

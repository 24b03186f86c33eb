"""POST /v1/completions: one or several prompts (text or token ids), n samples each, completed and streamed (SSE)
or whole. Choice i * n + j is sample j of prompt i. `echo` puts the prompt before each choice's text (and its
tokens' log-probabilities before the generated ones' with `logprobs`; max_tokens 0 then returns the prompt alone:
lm-eval-harness's loglikelihood requests); `prompt_logprobs` adds vLLM's per-token prompt log-probabilities."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from quickmoe.engine.outputs import StepOutput
from quickmoe.server.api_errors import APIError
from quickmoe.server.async_engine import RequestStream
from quickmoe.server.engine_errors import EngineStepFailed
from quickmoe.server.context import ServingContext
from quickmoe.server.protocol import CompletionRequest
from quickmoe.server.request_params import sampling_params
from quickmoe.server.responses import (
    SSE_DONE,
    AbortingStreamingResponse,
    CompletionLogprobs,
    JSONBytesResponse,
    completion_id,
    prompt_logprobs_entries,
    sse,
    until_disconnect,
    usage,
)
from quickmoe.server.streams import merged

__all__ = ["create_completion"]


@dataclass
class _Prompt:
    ids: list[int]
    text: str  # what echo shows


@dataclass
class _Choice:
    """One choice as it builds up."""

    text: list[str] = field(default_factory=list)
    logprobs: dict[str, Any] | None = None
    offset: int = 0  # characters of text so far (echoed prompt included)
    num_tokens: int = 0
    last: StepOutput | None = None


def _choice(index: int, text: str, logprobs: dict[str, Any] | None, out: StepOutput | None) -> dict[str, Any]:
    choice = {"index": index, "text": text, "logprobs": logprobs, "finish_reason": None}
    if out is not None and out.finished:
        choice["finish_reason"] = out.finish_reason
        choice["stop_reason"] = out.stop_reason
    return choice


async def create_completion(ctx: ServingContext, request: Request) -> Response:
    arrival = time.monotonic()
    req = await ctx.read_request(request, CompletionRequest)
    many = len(req.prompt) > 1
    prompts = []
    for i, prompt in enumerate(req.prompt):
        ids = await ctx.prompt_ids(prompt, f"prompt[{i}]" if many else "prompt")
        prompts.append(_Prompt(ids, prompt if isinstance(prompt, str) else ctx.tokenizer.decode(ids)))
    params = [sampling_params(req, prompt_len=len(p.ids), max_model_len=ctx.max_model_len,
                              vocab_size=ctx.vocab_size, defaults=ctx.config.sampling_defaults) for p in prompts]
    await ctx.check_structured(req, params[0])
    request_id, created = completion_id("cmpl")
    ids = [f"{request_id}-{i}" if many else request_id for i in range(len(prompts))]
    streams: list[RequestStream] = []

    def abort_all() -> None:
        for rid in ids:
            ctx.engine.abort(rid)  # nothing when it finished; frees it when the client left

    try:
        for i, (rid, prompt, sp) in enumerate(zip(ids, prompts, params)):
            streams.append(ctx.submit(rid, prompt.ids, sp, f"prompt[{i}]" if many else "prompt", arrival))
    except APIError:
        abort_all()
        raise
    head = {"id": request_id, "object": "text_completion", "created": created, "model": ctx.model_name}
    if req.stream:
        return AbortingStreamingResponse(_stream(ctx, streams, req, prompts, head), abort_all)
    try:
        body = await until_disconnect(request, _whole(ctx, streams, req, prompts, head))
    finally:
        abort_all()
    return JSONBytesResponse(body) if body is not None else Response(status_code=499)


def _echo(builder: CompletionLogprobs, req: CompletionRequest, prompt: _Prompt, out: StepOutput,
          choice: _Choice) -> tuple[str, dict[str, Any] | None]:
    """The echoed prompt (text, logprobs block) at a choice's first output."""
    block = builder.prompt_block(prompt.ids, out.prompt_logprobs) if req.logprobs is not None else None
    choice.offset = len(prompt.text)
    return prompt.text, block


def _usage(prompts: list[_Prompt], choices: list[_Choice]) -> dict[str, int]:
    return usage(sum(len(p.ids) for p in prompts), sum(c.num_tokens for c in choices))


async def _outputs(ctx: ServingContext, streams: list[RequestStream], req: CompletionRequest,
                   prompts: list[_Prompt], choices: list[_Choice]) -> AsyncIterator[tuple[int, str, Any, StepOutput]]:
    """Per engine output: (choice index, text, logprobs block, output), the echo and max_tokens 0 applied."""
    builder = CompletionLogprobs(ctx.tokenizer)
    async for i, timed in merged(streams):
        out = timed.output
        index = i * req.n + out.index
        choice = choices[index]
        first = choice.last is None
        choice.last = out
        text, block = "", None
        if first and req.echo:
            text, block = _echo(builder, req, prompts[i], out, choice)
        if req.max_tokens != 0:
            if out.logprobs:
                more = builder.block(out.logprobs, choice.offset)
                block = more if block is None else builder.extend(block, more)
            text += out.text
            choice.num_tokens += len(out.token_ids)
        choice.offset += len(out.text) if req.max_tokens != 0 else 0
        yield index, text, block, out


async def _whole(ctx: ServingContext, streams: list[RequestStream], req: CompletionRequest, prompts: list[_Prompt],
                 head: dict[str, Any]) -> dict[str, Any]:
    choices = [_Choice() for _ in range(len(prompts) * req.n)]
    prompt_logprobs: dict[int, list[Any]] = {}
    try:
        async for index, text, block, out in _outputs(ctx, streams, req, prompts, choices):
            choice = choices[index]
            choice.text.append(text)
            if block is not None:
                choice.logprobs = CompletionLogprobs.extend(choice.logprobs, block)
            if out.prompt_logprobs is not None and req.prompt_logprobs is not None:
                prompt_logprobs[index] = prompt_logprobs_entries(ctx.tokenizer, out.prompt_logprobs)
    except EngineStepFailed as exc:
        raise APIError(exc.status, str(exc), code=exc.code) from None
    body_choices = []
    for index, choice in enumerate(choices):
        assert choice.last is not None and choice.last.finished, "every choice ends with its finished output"
        entry = _choice(index, "".join(choice.text), choice.logprobs, choice.last)
        if req.prompt_logprobs is not None:
            entry["prompt_logprobs"] = prompt_logprobs.get(index)
        body_choices.append(entry)
    return {**head, "choices": body_choices, "usage": _usage(prompts, choices), "system_fingerprint": None}


async def _stream(ctx: ServingContext, streams: list[RequestStream], req: CompletionRequest, prompts: list[_Prompt],
                  head: dict[str, Any]) -> AsyncIterator[bytes]:
    continuous = req.stream_options is not None and req.stream_options.continuous_usage_stats
    choices = [_Choice() for _ in range(len(prompts) * req.n)]
    try:
        async for index, text, block, out in _outputs(ctx, streams, req, prompts, choices):
            if not (text or block or out.finished):
                continue
            chunk = {**head, "choices": [_choice(index, text, block, out)]}
            if continuous:
                chunk["usage"] = _usage(prompts, choices)
            yield sse(chunk)
        if req.include_usage:
            yield sse({**head, "choices": [], "usage": _usage(prompts, choices)})
    except EngineStepFailed as exc:
        ctx.metrics.count_error(exc.status)
        yield sse(APIError(exc.status, str(exc), code=exc.code).body())
    yield SSE_DONE

"""POST /v1/completions: one prompt (text or token ids) completed, streamed (SSE) or whole."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from quickmoe.engine.engine import StepOutput
from quickmoe.server.api_errors import APIError
from quickmoe.server.async_engine import EngineStepFailed, RequestStream
from quickmoe.server.context import ServingContext
from quickmoe.server.protocol import CompletionRequest
from quickmoe.server.request_params import sampling_params
from quickmoe.server.responses import (
    SSE_DONE,
    AbortingStreamingResponse,
    CompletionLogprobs,
    JSONBytesResponse,
    completion_id,
    sse,
    until_disconnect,
    usage,
)

__all__ = ["create_completion"]


def _choice(text: str, logprobs: dict[str, Any] | None, out: StepOutput | None) -> dict[str, Any]:
    choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": None}
    if out is not None and out.finished:
        choice["finish_reason"] = out.finish_reason
        choice["stop_reason"] = out.stop_reason
    return choice


async def create_completion(ctx: ServingContext, request: Request) -> Response:
    arrival = time.monotonic()
    req = await ctx.read_request(request, CompletionRequest)
    prompt_ids = await ctx.prompt_ids(req.prompt, "prompt")
    params = sampling_params(req, prompt_len=len(prompt_ids), max_model_len=ctx.max_model_len,
                             vocab_size=ctx.vocab_size)
    request_id, created = completion_id("cmpl")
    stream = ctx.submit(request_id, prompt_ids, params, "prompt", arrival)
    head = {"id": request_id, "object": "text_completion", "created": created, "model": ctx.model_name}
    if req.stream:
        return AbortingStreamingResponse(_stream(ctx, stream, req, head), lambda: ctx.engine.abort(request_id))
    try:
        body = await until_disconnect(request, _whole(ctx, stream, head))
    finally:
        ctx.engine.abort(request_id)  # nothing when it finished; frees it when the client left
    return JSONBytesResponse(body) if body is not None else Response(status_code=499)


async def _whole(ctx: ServingContext, stream: RequestStream, head: dict[str, Any]) -> dict[str, Any]:
    texts: list[str] = []
    builder = CompletionLogprobs(ctx.tokenizer)
    logprobs = None
    offset = 0
    last: StepOutput | None = None
    try:
        async for timed in stream:
            last = timed.output
            if last.logprobs:
                logprobs = builder.extend(logprobs, builder.block(last.logprobs, offset))
            texts.append(last.text)
            offset += len(last.text)
    except EngineStepFailed as exc:
        raise APIError(exc.status, str(exc), code=exc.code) from None
    assert last is not None and last.finished, "a request stream ends with its finished output"
    return {**head, "choices": [_choice("".join(texts), logprobs, last)],
            "usage": usage(last.num_prompt_tokens, last.num_output_tokens), "system_fingerprint": None}


async def _stream(ctx: ServingContext, stream: RequestStream, req: CompletionRequest,
                  head: dict[str, Any]) -> AsyncIterator[bytes]:
    builder = CompletionLogprobs(ctx.tokenizer)
    continuous = req.stream_options is not None and req.stream_options.continuous_usage_stats
    offset = 0
    last: StepOutput | None = None
    try:
        async for timed in stream:
            out = last = timed.output
            if not (out.text or out.logprobs or out.finished):
                continue
            logprobs = builder.block(out.logprobs, offset) if out.logprobs else None
            offset += len(out.text)
            chunk = {**head, "choices": [_choice(out.text, logprobs, out)]}
            if continuous:
                chunk["usage"] = usage(out.num_prompt_tokens, out.num_output_tokens)
            yield sse(chunk)
        if req.include_usage and last is not None:
            yield sse({**head, "choices": [], "usage": usage(last.num_prompt_tokens, last.num_output_tokens)})
    except EngineStepFailed as exc:
        ctx.metrics.count_error(exc.status)
        yield sse(APIError(exc.status, str(exc), code=exc.code).body())
    yield SSE_DONE

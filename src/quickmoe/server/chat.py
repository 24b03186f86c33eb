"""POST /v1/chat/completions: messages rendered in the model's chat format (harmony for gpt-oss), the reply split
into `reasoning_content` (analysis channel) and `content`, streamed (SSE) or whole."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from quickmoe.engine.engine import StepOutput
from quickmoe.server.api_errors import APIError
from quickmoe.server.async_engine import EngineStepFailed, RequestStream
from quickmoe.server.chat_output import ChatOutputSplitter
from quickmoe.server.context import ServingContext
from quickmoe.server.protocol import ChatCompletionRequest
from quickmoe.server.request_params import sampling_params
from quickmoe.server.responses import (
    SSE_DONE,
    AbortingStreamingResponse,
    JSONBytesResponse,
    chat_logprob,
    completion_id,
    sse,
    until_disconnect,
    usage,
)

__all__ = ["create_chat_completion"]


@dataclass
class _Step:
    """What one engine output adds to the reply."""

    reasoning: str
    content: str
    logprobs: list[dict[str, Any]] | None
    finish_reason: str | None  # set on the reply's last step
    out: StepOutput


async def create_chat_completion(ctx: ServingContext, request: Request) -> Response:
    arrival = time.monotonic()
    req = await ctx.read_request(request, ChatCompletionRequest)
    prompt_ids = await ctx.chat_prompt_ids(req)
    params = sampling_params(req, prompt_len=len(prompt_ids), max_model_len=ctx.max_model_len,
                             vocab_size=ctx.vocab_size, extra_stop_token_ids=ctx.tokenizer.chat_stop_token_ids)
    request_id, created = completion_id("chatcmpl")
    stream = ctx.submit(request_id, prompt_ids, params, "messages", arrival)
    head = {"id": request_id, "object": "chat.completion", "created": created, "model": ctx.model_name}
    steps = _steps(ctx, stream, req)
    if req.stream:
        return AbortingStreamingResponse(_stream(ctx, steps, req, head), lambda: ctx.engine.abort(request_id))
    try:
        body = await until_disconnect(request, _whole(steps, head, req.logprobs))
    finally:
        ctx.engine.abort(request_id)  # nothing when it finished; frees it when the client left or a stop matched
    return JSONBytesResponse(body) if body is not None else Response(status_code=499)


async def _steps(ctx: ServingContext, stream: RequestStream, req: ChatCompletionRequest) -> AsyncIterator[_Step]:
    """The reply step by step; a stop string found in the content ends it at once (the request is aborted)."""
    splitter = ChatOutputSplitter(ctx.tokenizer, req.stop_strings, req.include_stop_str_in_output)
    async for timed in stream:
        out = timed.output
        reasoning, content = splitter.add(out.token_ids)
        logprobs = [chat_logprob(ctx.tokenizer, lp) for lp in out.logprobs] if out.logprobs else None
        if splitter.stop is not None:
            ctx.engine.abort(stream.request_id, "stop")
            yield _Step(reasoning, content, logprobs, "stop", out)
            return
        finish_reason = None
        if out.finished:
            more_reasoning, more_content = splitter.finish()
            reasoning, content = reasoning + more_reasoning, content + more_content
            finish_reason = "stop" if splitter.stop is not None else out.finish_reason
        yield _Step(reasoning, content, logprobs, finish_reason, out)


async def _whole(steps: AsyncIterator[_Step], head: dict[str, Any], with_logprobs: bool) -> dict[str, Any]:
    reasoning: list[str] = []
    content: list[str] = []
    logprobs: list[dict[str, Any]] = []
    last: _Step | None = None
    try:
        async for step in steps:
            reasoning.append(step.reasoning)
            content.append(step.content)
            logprobs.extend(step.logprobs or ())
            last = step
    except EngineStepFailed as exc:
        raise APIError(exc.status, str(exc), code=exc.code) from None
    assert last is not None and last.finish_reason is not None, "a chat reply ends with a finish reason"
    message = {"role": "assistant", "content": "".join(content), "reasoning_content": "".join(reasoning) or None,
               "tool_calls": []}
    choice = {"index": 0, "message": message, "logprobs": {"content": logprobs} if with_logprobs else None,
              "finish_reason": last.finish_reason, "stop_reason": last.out.stop_reason}
    return {**head, "choices": [choice], "usage": usage(last.out.num_prompt_tokens, last.out.num_output_tokens),
            "system_fingerprint": None}


async def _stream(ctx: ServingContext, steps: AsyncIterator[_Step], req: ChatCompletionRequest,
                  head: dict[str, Any]) -> AsyncIterator[bytes]:
    head = {**head, "object": "chat.completion.chunk"}
    continuous = req.stream_options is not None and req.stream_options.continuous_usage_stats

    def chunk(delta: dict[str, Any], step: _Step | None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        body = {**head, "choices": [choice]}
        if step is not None:
            if step.logprobs:
                choice["logprobs"] = {"content": step.logprobs}
            choice["finish_reason"] = step.finish_reason
            if continuous:
                body["usage"] = usage(step.out.num_prompt_tokens, step.out.num_output_tokens)
        return sse(body)

    yield chunk({"role": "assistant", "content": ""}, None)
    last: _Step | None = None
    try:
        async for step in steps:
            last = step
            delta = {}
            if step.reasoning:
                delta["reasoning_content"] = step.reasoning
            if step.content:
                delta["content"] = step.content
            if delta or step.logprobs or step.finish_reason:
                yield chunk(delta, step)
        if req.include_usage and last is not None:
            yield sse({**head, "choices": [], "usage": usage(last.out.num_prompt_tokens, last.out.num_output_tokens)})
    except EngineStepFailed as exc:
        ctx.metrics.count_error(exc.status)
        yield sse(APIError(exc.status, str(exc), code=exc.code).body())
    yield SSE_DONE

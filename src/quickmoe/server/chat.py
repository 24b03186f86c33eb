"""POST /v1/chat/completions: messages rendered in the model's chat format (harmony for gpt-oss), each of the n
replies split into `reasoning` (analysis channel; `reasoning_content` is the same text under its older name),
`content` and `tool_calls` (finish_reason "tool_calls"), streamed (SSE) or whole. Function tools are described to
the model in harmony's developer message; tool_choice "none" leaves them out, a named function (or "required"
with one tool) starts the reply with that call's header, and "required" with several starts it with
` to=functions` (the model names the function)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from quickmoe.engine.outputs import StepOutput
from quickmoe.server.api_errors import APIError
from quickmoe.server.async_engine import RequestStream
from quickmoe.server.engine_errors import EngineStepFailed
from quickmoe.server.chat_output import ChatOutputSplitter, ToolCallDelta, reply_token_ids
from quickmoe.server.context import ServingContext
from quickmoe.server.protocol import ChatCompletionRequest
from quickmoe.server.request_params import sampling_params
from quickmoe.server.responses import (
    SSE_DONE,
    AbortingStreamingResponse,
    JSONBytesResponse,
    chat_logprob,
    completion_id,
    prompt_logprobs_entries,
    sse,
    until_disconnect,
    usage,
)

__all__ = ["create_chat_completion"]


@dataclass
class _Step:
    """What one engine output adds to reply `index`."""

    index: int
    reasoning: str
    content: str
    tool_calls: list[ToolCallDelta]
    logprobs: list[dict[str, Any]] | None
    finish_reason: str | None  # set on the reply's last step
    out: StepOutput


async def create_chat_completion(ctx: ServingContext, request: Request) -> Response:
    arrival = time.monotonic()
    req = await ctx.read_request(request, ChatCompletionRequest)
    prefix = ctx.forced_tool_prefix(req.forced_tool)
    prompt_ids = await ctx.chat_prompt_ids(req, suffix=prefix)
    params = sampling_params(req, prompt_len=len(prompt_ids), max_model_len=ctx.max_model_len,
                             vocab_size=ctx.vocab_size, extra_stop_token_ids=ctx.tokenizer.chat_stop_token_ids,
                             harmony_chat=ctx.tokenizer.uses_harmony and req.forced_tool is None,
                             defaults=ctx.config.sampling_defaults)
    await ctx.check_structured(req, params)
    request_id, created = completion_id("chatcmpl")
    stream = ctx.submit(request_id, prompt_ids, params, "messages", arrival)
    head = {"id": request_id, "object": "chat.completion", "created": created, "model": ctx.model_name}
    steps = _steps(ctx, stream, req, prefix)
    if req.stream:
        return AbortingStreamingResponse(_stream(ctx, steps, req, head), lambda: ctx.engine.abort(request_id))
    try:
        body = await until_disconnect(request, _whole(ctx, steps, req, head))
    finally:
        ctx.engine.abort(request_id)  # nothing when it finished; frees it when the client left or a stop matched
    return JSONBytesResponse(body) if body is not None else Response(status_code=499)


async def _steps(ctx: ServingContext, stream: RequestStream, req: ChatCompletionRequest,
                 prefix: list[int]) -> AsyncIterator[_Step]:
    """The replies step by step; a stop string found in a reply's content ends it at once (its sample is aborted)."""
    splitters = [ChatOutputSplitter(ctx.tokenizer, req.stop_strings, req.include_stop_str_in_output, prefix)
                 for _ in range(req.n)]
    stopped: set[int] = set()
    async for timed in stream:
        out = timed.output
        if out.index in stopped:  # the abort that followed its stop string
            continue
        splitter = splitters[out.index]
        delta = splitter.add(reply_token_ids(ctx.tokenizer, out))
        logprobs = [chat_logprob(ctx.tokenizer, lp) for lp in out.logprobs] if out.logprobs else None
        if splitter.stop is not None:
            stopped.add(out.index)
            if req.n == 1:
                ctx.engine.abort(stream.request_id, "stop")
            else:
                ctx.engine.abort_sample(stream.request_id, out.index)
            yield _Step(out.index, delta.reasoning, delta.content, delta.tool_calls, logprobs, "stop", out)
            if req.n == 1:
                return
            continue
        finish_reason = None
        if out.finished:
            delta = delta + splitter.finish()
            finish_reason = "stop" if splitter.stop is not None else out.finish_reason
            if finish_reason == "stop" and splitter.num_tool_calls and splitter.stop is None:
                finish_reason = "tool_calls"
        yield _Step(out.index, delta.reasoning, delta.content, delta.tool_calls, logprobs, finish_reason, out)


def _usage(steps: dict[int, _Step], num_output_tokens: int) -> dict[str, int]:
    return usage(next(iter(steps.values())).out.num_prompt_tokens, num_output_tokens)


async def _whole(ctx: ServingContext, steps: AsyncIterator[_Step], req: ChatCompletionRequest,
                 head: dict[str, Any]) -> dict[str, Any]:
    reasoning: list[list[str]] = [[] for _ in range(req.n)]
    content: list[list[str]] = [[] for _ in range(req.n)]
    logprobs: list[list[dict[str, Any]]] = [[] for _ in range(req.n)]
    calls: list[list[dict[str, Any]]] = [[] for _ in range(req.n)]
    last: dict[int, _Step] = {}
    num_tokens = 0
    prompt_logprobs = None
    try:
        async for step in steps:
            reasoning[step.index].append(step.reasoning)
            content[step.index].append(step.content)
            logprobs[step.index].extend(step.logprobs or ())
            for call in step.tool_calls:
                if call.id is not None:
                    calls[step.index].append({"id": call.id, "type": "function",
                                              "function": {"name": call.name, "arguments": ""}})
                calls[step.index][call.index]["function"]["arguments"] += call.arguments
            last[step.index] = step
            num_tokens += len(step.out.token_ids)
            if step.out.prompt_logprobs is not None and prompt_logprobs is None:
                prompt_logprobs = prompt_logprobs_entries(ctx.tokenizer, step.out.prompt_logprobs)
    except EngineStepFailed as exc:
        raise APIError(exc.status, str(exc), code=exc.code) from None
    choices = []
    for i in range(req.n):
        step = last.get(i)
        assert step is not None and step.finish_reason is not None, "a chat reply ends with a finish reason"
        thought = "".join(reasoning[i]) or None
        text = "".join(content[i])
        message = {"role": "assistant", "content": text if text or not calls[i] else None, "reasoning": thought,
                   "reasoning_content": thought, "tool_calls": calls[i]}
        choices.append({"index": i, "message": message,
                        "logprobs": {"content": logprobs[i]} if req.logprobs else None,
                        "finish_reason": step.finish_reason, "stop_reason": step.out.stop_reason})
    body = {**head, "choices": choices, "usage": _usage(last, num_tokens), "system_fingerprint": None}
    if req.prompt_logprobs is not None:
        body["prompt_logprobs"] = prompt_logprobs
    return body


async def _stream(ctx: ServingContext, steps: AsyncIterator[_Step], req: ChatCompletionRequest,
                  head: dict[str, Any]) -> AsyncIterator[bytes]:
    head = {**head, "object": "chat.completion.chunk"}
    continuous = req.stream_options is not None and req.stream_options.continuous_usage_stats
    num_tokens = 0

    def chunk(index: int, delta: dict[str, Any], step: _Step | None) -> bytes:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": None}
        body = {**head, "choices": [choice]}
        if step is not None:
            if step.logprobs:
                choice["logprobs"] = {"content": step.logprobs}
            choice["finish_reason"] = step.finish_reason
            if continuous:
                body["usage"] = usage(step.out.num_prompt_tokens, num_tokens)
        return sse(body)

    for i in range(req.n):
        yield chunk(i, {"role": "assistant", "content": ""}, None)
    last: dict[int, _Step] = {}
    try:
        async for step in steps:
            last[step.index] = step
            num_tokens += len(step.out.token_ids)
            delta = {}
            if step.reasoning:
                delta["reasoning"] = delta["reasoning_content"] = step.reasoning
            if step.content:
                delta["content"] = step.content
            if step.tool_calls:
                delta["tool_calls"] = [_call_delta(call) for call in step.tool_calls]
            if delta or step.logprobs or step.finish_reason:
                yield chunk(step.index, delta, step)
        if req.include_usage and last:
            yield sse({**head, "choices": [], "usage": _usage(last, num_tokens)})
    except EngineStepFailed as exc:
        ctx.metrics.count_error(exc.status)
        yield sse(APIError(exc.status, str(exc), code=exc.code).body())
    yield SSE_DONE


def _call_delta(call: ToolCallDelta) -> dict[str, Any]:
    """A streamed tool call piece: the first carries the call's id, type and name."""
    if call.id is None:
        return {"index": call.index, "function": {"arguments": call.arguments}}
    return {"index": call.index, "id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": call.arguments}}

"""POST /v1/responses (OpenAI's Responses API) over harmony: the input items (after the stored conversation of
`previous_response_id`) and `instructions` rendered as a chat, the reply's harmony messages returned as output
items: "reasoning" (analysis channel), "function_call" (a message to functions.NAME) and "message" (the rest),
whole or as the API's stream of events (response.created ... response.completed). Responses made with `store`
(the default) are kept in memory, the newest MAX_STORED, so a later request can continue them."""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.errors import RequestError
from quickmoe.server.api_errors import APIError
from quickmoe.server.async_engine import RequestStream
from quickmoe.server.engine_errors import EngineStepFailed
from quickmoe.server.chat_output import PlainTextParser, reply_token_ids
from quickmoe.server.context import ServingContext
from quickmoe.server.harmony_stream import HarmonyStreamParser
from quickmoe.server.request_params import max_tokens_for
from quickmoe.server.responses import AbortingStreamingResponse, JSONBytesResponse, sse, until_disconnect
from quickmoe.server.responses_protocol import ResponsesRequest, input_messages

__all__ = ["MAX_STORED", "ResponseStore", "create_response"]

MAX_STORED = 1024  # responses kept for previous_response_id (least recently made dropped first)


class ResponseStore:
    """Stored conversations by response id (their messages: input and output), bounded."""

    def __init__(self, max_items: int = MAX_STORED) -> None:
        self.max_items = max_items
        self._items: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    def get(self, response_id: str) -> list[dict[str, Any]] | None:
        return self._items.get(response_id)

    def put(self, response_id: str, messages: list[dict[str, Any]]) -> None:
        self._items[response_id] = messages
        while len(self._items) > self.max_items:
            self._items.popitem(last=False)


@dataclass
class _Item:
    kind: str  # "reasoning" | "message" | "function_call"
    id: str
    text: str = ""
    name: str | None = None
    call_id: str | None = None

    def json(self, status: str = "completed") -> dict[str, Any]:
        if self.kind == "reasoning":
            return {"id": self.id, "type": "reasoning", "summary": [], "status": status,
                    "content": [{"type": "reasoning_text", "text": self.text}]}
        if self.kind == "function_call":
            return {"id": self.id, "type": "function_call", "call_id": self.call_id, "name": self.name,
                    "arguments": self.text, "status": status}
        return {"id": self.id, "type": "message", "role": "assistant", "status": status,
                "content": [{"type": "output_text", "text": self.text, "annotations": [], "logprobs": []}]}

    def message(self) -> dict[str, Any]:
        """The item as a chat message of the stored conversation."""
        if self.kind == "reasoning":
            return {"role": "assistant", "content": "", "reasoning": self.text}
        if self.kind == "function_call":
            return {"role": "assistant", "content": "", "tool_calls": [
                {"id": self.call_id, "function": {"name": self.name, "arguments": self.text}}]}
        return {"role": "assistant", "content": self.text}


@dataclass
class _Output:
    """The reply's output items as the harmony pieces arrive, and the stream events each piece causes."""

    parser: Any
    items: list[_Item] = field(default_factory=list)
    _message: int | None = None

    def feed(self, pieces) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for piece in pieces:
            if piece.message != self._message:
                events += self._close()
                self._message = piece.message
                events += self._open(piece)
            item, index = self.items[-1], len(self.items) - 1
            if not piece.text:
                continue
            item.text += piece.text
            kind = {"reasoning": "response.reasoning_text.delta", "message": "response.output_text.delta",
                    "function_call": "response.function_call_arguments.delta"}[item.kind]
            event = {"type": kind, "item_id": item.id, "output_index": index, "delta": piece.text}
            if item.kind != "function_call":
                event["content_index"] = 0
            if item.kind == "message":
                event["logprobs"] = []
            events.append(event)
        return events

    def _open(self, piece) -> list[dict[str, Any]]:
        if piece.recipient is not None and piece.recipient != "assistant":
            item = _Item("function_call", f"fc_{uuid.uuid4().hex}", name=piece.recipient.removeprefix("functions."),
                         call_id=f"call_{uuid.uuid4().hex[:24]}")
        elif piece.channel == "analysis":
            item = _Item("reasoning", f"rs_{uuid.uuid4().hex}")
        else:
            item = _Item("message", f"msg_{uuid.uuid4().hex}")
        self.items.append(item)
        index = len(self.items) - 1
        events = [{"type": "response.output_item.added", "output_index": index, "item": item.json("in_progress")}]
        if item.kind == "message":
            events.append({"type": "response.content_part.added", "item_id": item.id, "output_index": index,
                           "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})
        return events

    def _close(self) -> list[dict[str, Any]]:
        if self._message is None:
            return []
        item, index = self.items[-1], len(self.items) - 1
        head = {"item_id": item.id, "output_index": index}
        if item.kind == "reasoning":
            events = [{"type": "response.reasoning_text.done", **head, "content_index": 0, "text": item.text}]
        elif item.kind == "function_call":
            events = [{"type": "response.function_call_arguments.done", **head, "arguments": item.text,
                       "name": item.name}]
        else:
            part = item.json()["content"][0]
            events = [{"type": "response.output_text.done", **head, "content_index": 0, "text": item.text,
                       "logprobs": []},
                      {"type": "response.content_part.done", **head, "content_index": 0, "part": part}]
        return events + [{"type": "response.output_item.done", "output_index": index, "item": item.json()}]

    def finish(self) -> list[dict[str, Any]]:
        events = self.feed(self.parser.finish())
        events += self._close()
        self._message = None
        return events


async def create_response(ctx: ServingContext, store: ResponseStore, request: Request) -> Response:
    req = await ctx.read_request(request, ResponsesRequest)
    history: list[dict[str, Any]] = []
    if req.previous_response_id is not None:
        stored = store.get(req.previous_response_id)
        if stored is None:
            raise APIError(400, f"previous_response_id: no stored response {req.previous_response_id!r} (responses "
                           f"are kept in memory, the newest {store.max_items})", param="previous_response_id",
                           code="not_found")
        history = list(stored)
    try:
        messages = history + input_messages(req.input)
    except RequestError as exc:
        raise APIError(400, str(exc), param="input", code="invalid_value") from None
    system = [{"role": "developer", "content": req.instructions}] if req.instructions else []
    prefix = ctx.forced_tool_prefix(req.forced_tool)
    prompt_ids = await ctx.chat_prompt_ids(req, messages=system + messages, suffix=prefix)
    try:
        max_tokens = max_tokens_for(req.max_output_tokens, "max_output_tokens", len(prompt_ids), ctx.max_model_len)
        params = SamplingParams(max_tokens=max_tokens, temperature=1.0 if req.temperature is None else req.temperature,
                                top_p=1.0 if req.top_p is None else req.top_p, skip_special_tokens=False,
                                stop_token_ids=tuple(ctx.tokenizer.chat_stop_token_ids))
    except RequestError as exc:
        raise APIError(400, str(exc), code="invalid_value") from None
    response_id = f"resp_{uuid.uuid4().hex}"
    stream = ctx.submit(response_id, prompt_ids, params, "input", time.monotonic())
    parser = HarmonyStreamParser(ctx.tokenizer) if ctx.tokenizer.uses_harmony else PlainTextParser(ctx.tokenizer)
    output = _Output(parser)
    head = _head(ctx, req, response_id)
    prefix_events = output.feed(parser.feed(prefix))

    def keep(final: dict[str, Any]) -> None:
        if req.store:
            store.put(response_id, messages + [item.message() for item in output.items])

    if req.stream:
        return AbortingStreamingResponse(_events(ctx, stream, output, head, prefix_events, keep),
                                         lambda: ctx.engine.abort(response_id))
    try:
        body = await until_disconnect(request, _whole(ctx, stream, output, head, keep))
    finally:
        ctx.engine.abort(response_id)
    return JSONBytesResponse(body) if body is not None else Response(status_code=499)


def _head(ctx: ServingContext, req: ResponsesRequest, response_id: str) -> dict[str, Any]:
    return {"id": response_id, "object": "response", "created_at": int(time.time()), "model": ctx.model_name,
            "status": "in_progress", "output": [], "error": None, "incomplete_details": None,
            "instructions": req.instructions, "max_output_tokens": req.max_output_tokens,
            "previous_response_id": req.previous_response_id, "store": req.store,
            "temperature": 1.0 if req.temperature is None else req.temperature,
            "top_p": 1.0 if req.top_p is None else req.top_p,
            "tools": [t.model_dump() for t in req.tools or ()],
            "tool_choice": req.tool_choice.model_dump(exclude_none=True) if hasattr(req.tool_choice, "model_dump")
            else req.tool_choice or "auto", "parallel_tool_calls": req.parallel_tool_calls is not False,
            "reasoning": {"effort": req.reasoning_effort, "summary": None}, "text": {"format": {"type": "text"}},
            "truncation": "disabled", "metadata": req.metadata or {}, "user": req.user, "usage": None}


def _final(head: dict[str, Any], output: _Output, last) -> dict[str, Any]:
    out = last.output
    incomplete = out.finish_reason == "length"
    return {**head, "status": "incomplete" if incomplete else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "output": [item.json() for item in output.items],
            "usage": {"input_tokens": out.num_prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": out.num_output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": out.num_prompt_tokens + out.num_output_tokens}}


async def _whole(ctx: ServingContext, stream: RequestStream, output: _Output, head: dict[str, Any],
                 keep) -> dict[str, Any]:
    last = None
    try:
        async for timed in stream:
            last = timed
            output.feed(output.parser.feed(reply_token_ids(ctx.tokenizer, timed.output)))
    except EngineStepFailed as exc:
        raise APIError(exc.status, str(exc), code=exc.code) from None
    output.finish()
    final = _final(head, output, last)
    keep(final)
    return final


async def _events(ctx: ServingContext, stream: RequestStream, output: _Output, head: dict[str, Any],
                  prefix_events: list[dict[str, Any]], keep) -> AsyncIterator[bytes]:
    number = 0

    def event(body: dict[str, Any]) -> bytes:
        nonlocal number
        number += 1
        return sse({**body, "sequence_number": number - 1})

    yield event({"type": "response.created", "response": head})
    yield event({"type": "response.in_progress", "response": head})
    for body in prefix_events:
        yield event(body)
    last = None
    try:
        async for timed in stream:
            last = timed
            for body in output.feed(output.parser.feed(reply_token_ids(ctx.tokenizer, timed.output))):
                yield event(body)
        for body in output.finish():
            yield event(body)
        final = _final(head, output, last)
        keep(final)
        yield event({"type": f"response.{final['status']}", "response": final})
    except EngineStepFailed as exc:
        ctx.metrics.count_error(exc.status)
        yield event({"type": "error", "code": exc.code, "message": str(exc), "param": None})

"""ServingContext: what the endpoints share (the engine, tokenizer, limits, metrics), and the steps every
generation request takes: read and validate the body, tokenize off the event loop, submit to the engine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import ValidationError
from starlette.requests import ClientDisconnect, Request

from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.errors import RequestError, TokenizerError
from quickmoe.server.api_errors import APIError, from_validation_error
from quickmoe.server.async_engine import AsyncEngine, RequestStream
from quickmoe.server.engine_errors import EngineOverloaded, EngineUnavailable
from quickmoe.server.config import ServerConfig
from quickmoe.server.metrics import ServerMetrics
from quickmoe.server.protocol import ChatCompletionRequest, CompletionRequest
from quickmoe.server.request_fields import unsupported_field
from quickmoe.server.request_params import prompt_error
from quickmoe.tokenizer.base import Tokenizer

__all__ = ["ServingContext"]

RequestT = TypeVar("RequestT", CompletionRequest, ChatCompletionRequest)


@dataclass
class ServingContext:
    """The server's shared state (one per app)."""

    engine: AsyncEngine
    tokenizer: Tokenizer
    model_name: str
    max_model_len: int
    vocab_size: int
    config: ServerConfig
    metrics: ServerMetrics
    created: int

    async def read_request(self, request: Request, model: type[RequestT]) -> RequestT:
        """The body as `model`: 400 for malformed JSON, a non-object, an invalid or unsupported field, or a model
        other than the one served; 413 for a body over the configured size."""
        body = await self._body(request)
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise APIError(400, f"the request body is not valid JSON ({str(exc)[:200]})", code="invalid_json") \
                from None
        if not isinstance(data, dict):
            raise APIError(400, f"the request body must be a JSON object, got {type(data).__name__}",
                           code="invalid_json")
        unsupported = unsupported_field(model.endpoint, data)
        if unsupported is not None:
            raise APIError(400, str(unsupported), param=unsupported.field, code="unsupported_value")
        try:
            parsed = model.model_validate(data)
        except ValidationError as exc:
            raise from_validation_error(exc) from None
        except RecursionError:
            raise APIError(400, "the request body is nested too deeply", code="invalid_json") from None
        problem = parsed.check()
        if problem is not None:
            raise APIError(400, str(problem), param=problem.field, code="unsupported_value")
        if parsed.model is not None and parsed.model != self.model_name:
            raise APIError(400, f"model {parsed.model!r} is not served here; this server serves "
                           f"{self.model_name!r} (GET /v1/models)", param="model", code="model_not_found")
        return parsed

    async def _body(self, request: Request) -> bytes:
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise APIError(413, f"the request body has {declared} bytes; at most {limit} are accepted",
                           code="body_too_large")
        chunks, size = [], 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise APIError(413, f"the request body exceeds {limit} bytes", code="body_too_large")
                chunks.append(chunk)
        except ClientDisconnect:
            raise APIError(400, "the client disconnected while sending the body", code="client_disconnected") \
                from None
        return b"".join(chunks)

    async def prompt_ids(self, prompt: str | Sequence[int], field: str) -> list[int]:
        """Tokenize (on a worker thread: long prompts must not stall the event loop) and check a prompt."""
        try:
            return await asyncio.to_thread(self.engine.core.checker.prompt_ids, prompt)
        except (RequestError, TokenizerError) as exc:
            raise prompt_error(exc, field) from None

    def forced_tool_prefix(self, forced_tool: str | None) -> list[int]:
        """The tokens that open a call of `forced_tool` (tool_choice naming a function), which the prompt ends
        with so that the model writes its arguments; [] when no tool is forced. A 400 on a non-harmony model."""
        if forced_tool is None:
            return []
        if not self.tokenizer.uses_harmony:
            raise APIError(400, "tool_choice: forcing a tool call needs a harmony model (gpt-oss)",
                           param="tool_choice", code="unsupported_value")
        return self.tokenizer.tool_call_prefix(forced_tool)

    async def chat_prompt_ids(self, req, *, check: bool = True, messages: list[dict] | None = None,
                              tools: list[dict] | None = None, suffix: list[int] = ()) -> list[int]:
        """The rendered chat of a request (its `messages`, `reasoning_effort` and `rendered_tools` where it has
        them, unless given), then `suffix` (the start of a forced tool call); checked as a prompt (vocabulary,
        room in the context) unless `check` is false."""
        messages = messages if messages is not None else [m.as_dict() for m in req.messages]
        tools = tools if tools is not None else getattr(req, "rendered_tools", None)

        def render() -> list[int]:
            return self.tokenizer.render_chat(messages, getattr(req, "reasoning_effort", None), tools) + list(suffix)

        try:
            ids = await asyncio.to_thread(render)
        except (RequestError, TokenizerError) as exc:
            raise APIError(400, f"messages: {exc}", param="messages", code="invalid_value") from None
        return await self.prompt_ids(ids, "messages") if check else ids

    async def check_structured(self, req, params: SamplingParams) -> None:
        """400 naming response_format / structured_outputs when the grammar asked for is invalid (compiled on a
        worker thread: a large schema takes a while)."""
        if params.structured is None:
            return
        try:
            await asyncio.to_thread(self.engine.core.checker.structured, params.structured)
        except RequestError as exc:
            raise APIError(400, str(exc), param=req.structured_field, code="invalid_value") from None

    def submit(self, request_id: str, prompt_ids: list[int], params: SamplingParams, field: str,
               arrival: float) -> RequestStream:
        try:
            return self.engine.add_request(request_id, prompt_ids, params, arrival)
        except EngineOverloaded as exc:
            raise APIError(503, str(exc), code="overloaded") from None
        except EngineUnavailable as exc:
            raise APIError(503, str(exc), code="unavailable") from None
        except RequestError as exc:
            raise prompt_error(exc, field) from None

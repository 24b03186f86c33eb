"""vLLM's tokenizer endpoints: POST /tokenize (a prompt, or chat messages rendered as chat completions renders
them) -> {"count", "max_model_len", "tokens"}, and POST /detokenize ({"tokens"}) -> {"prompt"}."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator
from starlette.requests import Request
from starlette.responses import Response

from quickmoe.errors import TokenizerError
from quickmoe.server.api_errors import APIError
from quickmoe.server.context import ServingContext
from quickmoe.server.protocol import ChatMessage
from quickmoe.server.request_fields import StrictModel
from quickmoe.server.responses import JSONBytesResponse
from quickmoe.server.tool_protocol import ToolDefinition

__all__ = ["DetokenizeRequest", "TokenizeRequest", "detokenize", "tokenize"]


class TokenizeRequest(StrictModel):
    endpoint: ClassVar[str] = "tokenize"
    model: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = Field(default=None, min_length=1)
    tools: list[ToolDefinition] | None = None  # described to the model as chat completions describes them
    add_special_tokens: bool = True  # the tokenizers here add none to a plain prompt either way
    add_generation_prompt: bool = True  # a chat ends with the assistant's header, as chat completions renders it

    @model_validator(mode="after")
    def _one_input(self) -> TokenizeRequest:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("expected exactly one of 'prompt' and 'messages'")
        if not self.add_generation_prompt:
            raise ValueError("add_generation_prompt false is not supported (the chat is rendered for completion)")
        return self

    def check(self) -> None:
        return None

    @property
    def rendered_tools(self) -> list[dict[str, Any]] | None:
        return [t.function.model_dump() for t in self.tools] if self.tools else None


class DetokenizeRequest(StrictModel):
    endpoint: ClassVar[str] = "detokenize"
    model: str | None = None
    tokens: list[int] = Field(max_length=1 << 20)

    def check(self) -> None:
        return None


async def tokenize(ctx: ServingContext, request: Request) -> Response:
    req = await ctx.read_request(request, TokenizeRequest)
    if req.messages is not None:
        ids = await ctx.chat_prompt_ids(req, check=False)
    else:
        try:
            ids = ctx.tokenizer.encode(req.prompt)
        except TokenizerError as exc:
            raise APIError(400, f"prompt: {exc}", param="prompt", code="invalid_value") from None
    body: dict[str, Any] = {"count": len(ids), "max_model_len": ctx.max_model_len, "tokens": ids}
    return JSONBytesResponse(body)


async def detokenize(ctx: ServingContext, request: Request) -> Response:
    req = await ctx.read_request(request, DetokenizeRequest)
    bad = [t for t in req.tokens if not 0 <= t < ctx.vocab_size]
    if bad:
        raise APIError(400, f"tokens: token id {bad[0]} is outside the vocabulary [0, {ctx.vocab_size})",
                       param="tokens", code="invalid_value")
    try:
        text = ctx.tokenizer.decode(req.tokens)
    except TokenizerError as exc:
        raise APIError(400, f"tokens: {exc}", param="tokens", code="invalid_value") from None
    return JSONBytesResponse({"prompt": text})

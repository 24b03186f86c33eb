"""Response plumbing shared by the endpoints: JSON and SSE encoding, OpenAI logprob and usage objects, a
streaming response that aborts its request however it ends, and a wait that notices a client leaving."""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from quickmoe.engine.outputs import TokenLogprob
from quickmoe.tokenizer.base import Tokenizer

__all__ = ["AbortingStreamingResponse", "JSONBytesResponse", "completion_id", "dumps", "finite", "sse",
           "until_disconnect", "usage"]

T = TypeVar("T")
MIN_LOGPROB = -9999.0  # what -inf is reported as (JSON has no infinity)
SSE_DONE = b"data: [DONE]\n\n"


# Characters str.splitlines() breaks lines at but JSON leaves unescaped: a client that reads an SSE stream with
# splitlines-style decoding (httpx's iter_lines) would cut a data line at them. Escaped, the JSON is the same.
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).translate(_LINE_BREAKS).encode()


def sse(obj: Any) -> bytes:
    return b"data: " + dumps(obj) + b"\n\n"


class JSONBytesResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content)


def completion_id(prefix: str) -> tuple[str, int]:
    """A fresh response id and the `created` timestamp."""
    return f"{prefix}-{uuid.uuid4().hex}", int(time.time())


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def finite(logprob: float) -> float:
    return logprob if math.isfinite(logprob) else MIN_LOGPROB


def token_text(tokenizer: Tokenizer, token_id: int) -> str:
    return tokenizer.decode([token_id])


def chat_logprob(tokenizer: Tokenizer, lp: TokenLogprob) -> dict[str, Any]:
    """One generated token in the chat API's logprobs.content list."""
    def entry(token_id: int, value: float) -> dict[str, Any]:
        return {"token": token_text(tokenizer, token_id), "logprob": finite(value),
                "bytes": list(tokenizer.decode_bytes([token_id]))}

    return {**entry(lp.token_id, lp.logprob), "top_logprobs": [entry(t, v) for t, v in lp.top]}


class CompletionLogprobs:
    """The completions API's logprobs object (tokens, token_logprobs, top_logprobs, text_offset), built up."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def block(self, logprobs: list[TokenLogprob], text_offset: int) -> dict[str, Any]:
        tok = self.tokenizer
        return {"tokens": [token_text(tok, lp.token_id) for lp in logprobs],
                "token_logprobs": [finite(lp.logprob) for lp in logprobs],
                "top_logprobs": [{token_text(tok, t): finite(v) for t, v in lp.top} for lp in logprobs],
                "text_offset": [text_offset] * len(logprobs)}

    def prompt_block(self, prompt_ids: list[int], logprobs: list[TokenLogprob | None]) -> dict[str, Any]:
        """The echoed prompt's tokens (the first has no log-probability: null), offsets from 0."""
        tok = self.tokenizer
        texts = [token_text(tok, t) for t in prompt_ids]
        offsets = [sum(len(t) for t in texts[:i]) for i in range(len(texts))]
        return {"tokens": texts, "token_logprobs": [finite(lp.logprob) if lp else None for lp in logprobs],
                "top_logprobs": [{token_text(tok, t): finite(v) for t, v in lp.top} if lp else None
                                 for lp in logprobs], "text_offset": offsets}

    @staticmethod
    def extend(total: dict[str, Any] | None, block: dict[str, Any]) -> dict[str, Any]:
        if total is None:
            return {k: list(v) for k, v in block.items()}
        for key, values in block.items():
            total[key].extend(values)
        return total


def prompt_logprobs_entries(tokenizer: Tokenizer, logprobs: list[TokenLogprob | None]) -> list[Any]:
    """vLLM's `prompt_logprobs`: per prompt token, null (the first) or {token id: {logprob, rank, decoded_token}}
    for the token and its top alternatives (rank: 1 + its place among the alternatives; null when outside them)."""
    out: list[Any] = []
    for lp in logprobs:
        if lp is None:
            out.append(None)
            continue
        entry = {str(t): {"logprob": finite(v), "rank": rank, "decoded_token": token_text(tokenizer, t)}
                 for rank, (t, v) in enumerate(lp.top, start=1)}
        if str(lp.token_id) not in entry:
            entry[str(lp.token_id)] = {"logprob": finite(lp.logprob), "rank": None,
                                       "decoded_token": token_text(tokenizer, lp.token_id)}
        out.append(entry)
    return out


class AbortingStreamingResponse(StreamingResponse):
    """A StreamingResponse that calls `on_close` when it ends for any reason (done, client gone, cancelled), so
    the request's engine work stops even if the body iterator never started."""

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        super().__init__(content, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


async def _disconnected(request: Request) -> None:
    """Returns when the client closes its connection (the body must have been read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def until_disconnect(request: Request, work: Awaitable[T]) -> T | None:
    """`work`'s result, or None if the client disconnected first (work is then cancelled)."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
    return task.result() if task in done else None

"""Several requests' output streams read as one (a /v1/completions request with several prompts)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from quickmoe.server.async_engine import RequestStream, TimedOutput

__all__ = ["merged"]

_END = object()


async def merged(streams: Sequence[RequestStream]) -> AsyncIterator[tuple[int, TimedOutput]]:
    """(stream index, output) in arrival order until every stream ended; the first error any stream raises is
    raised here (the other readers are cancelled)."""
    if len(streams) == 1:
        async for timed in streams[0]:
            yield 0, timed
        return
    queue: asyncio.Queue = asyncio.Queue()

    async def pump(i: int, stream: RequestStream) -> None:
        try:
            async for timed in stream:
                queue.put_nowait((i, timed))
        except Exception as exc:  # handed to the reader, which raises it
            queue.put_nowait(exc)
        queue.put_nowait(_END)

    tasks = [asyncio.ensure_future(pump(i, s)) for i, s in enumerate(streams)]
    try:
        left = len(tasks)
        while left:
            item = await queue.get()
            if item is _END:
                left -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                yield item
    finally:
        for task in tasks:
            task.cancel()

"""`bench serve --op-family-steps N`: one step profile of the server per concurrency level, taken under the level's
load (a quickmoe server started with --enable-step-profile: POST /profile_steps, server/profile_steps.py).

The level's client side sets `started` once its first request has finished while others still run or wait (its
streams are all running by then; with the default 4 x C requests a level, three quarters are still to come);
`profile_level` then asks the server to trace its next N steps and returns the server's summary, or {"error": ...}
(another server, the option off there, a device without CUDA). A level where no request ended while others ran
asks nothing (an idle server would wait for steps). The traced steps run slower, so the level's latencies include
that: off by default.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["PROFILE_TIMEOUT_S", "profile_level", "profile_line"]

PROFILE_TIMEOUT_S = 60.0  # how long the server may wait for the steps (it waits for work when it has none)


async def profile_level(client, root: str, headers: dict[str, str], steps: int,
                        started: asyncio.Event) -> dict[str, Any]:
    await started.wait()
    try:
        response = await client.post(f"{root}/profile_steps", json={"steps": steps, "timeout_s": PROFILE_TIMEOUT_S},
                                     headers=headers, timeout=PROFILE_TIMEOUT_S + 30)
    except Exception as exc:  # the transport's failure: reported on the level's line, the run goes on
        return {"error": f"{type(exc).__name__}: {exc}"}
    if response.status_code != 200:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:200]
        return {"error": f"HTTP {response.status_code}: {message}"}
    return response.json()


def profile_line(doc: dict[str, Any] | None) -> str | None:
    """The level's line: the profiled steps (their kinds and tokens a step) and their GPU time by op family."""
    from quickmoe.bench.step_profile import family_shares_line

    if not doc:
        return None
    if "error" in doc:
        return f"server step profile: none ({doc['error']})"
    kinds = doc.get("step_kinds") or {}
    which = ", ".join(f"{k['steps']} {kind} ({k['tokens'] / k['steps']:.0f} tokens each)"
                      for kind, k in kinds.items()) or f"{doc['steps']}"
    return f"server steps by op family (profiler; {which}): {family_shares_line(doc)}"

"""POST /profile_steps: where the GPU time of the server's next engine steps goes, by op family (attention, moe,
dense, communication, other), from a torch.profiler trace of their CUDA kernels (executor/op_profile.py).

Off unless `quickmoe serve --enable-step-profile` (a 404 saying so otherwise): the traced steps run slower, which
every request in flight feels. Behind the API key like /v1/*. Body: {"steps": N (1-64, default 8), "timeout_s":
seconds to wait for them (default 60)}. The profile covers the next N steps the engine runs, fewer if its work
runs out first, and waits for work when there is none. Answer: {"steps", "gpu_ms_per_step", "kernels_per_step",
"ms_per_step": {family: ms}, "shares": {family: fraction}, "step_kinds": {kind: {"steps", "tokens"}}, "top":
[[kernel, ms per step], ...]}; 400 for a bad field or a device without CUDA, 409 while another profile runs, 504
when no step ran within timeout_s. `quickmoe bench serve --op-family-steps N` asks for one per concurrency level.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from quickmoe.engine.step_profile import MAX_PROFILE_STEPS
from quickmoe.server.api_errors import APIError
from quickmoe.server.engine_errors import EngineUnavailable, ProfileBusy
from quickmoe.server.context import ServingContext
from quickmoe.server.request_fields import StrictModel
from quickmoe.server.responses import JSONBytesResponse

__all__ = ["ProfileStepsRequest", "profile_steps"]


class ProfileStepsRequest(StrictModel):
    endpoint: ClassVar[str] = "profile_steps"
    model: str | None = None
    steps: int = Field(default=8, ge=1, le=MAX_PROFILE_STEPS)
    timeout_s: float = Field(default=60.0, gt=0, le=3600)

    def check(self) -> None:
        return None


async def profile_steps(ctx: ServingContext, request: Request) -> Response:
    if not ctx.config.enable_step_profile:
        raise APIError(404, "the step profile is off on this server: start it with `quickmoe serve "
                       "--enable-step-profile` to use POST /profile_steps", code="step_profile_disabled")
    req = await ctx.read_request(request, ProfileStepsRequest)
    try:
        doc = await ctx.engine.profile_steps(req.steps, timeout_s=req.timeout_s)
    except ProfileBusy as exc:
        raise APIError(409, str(exc), code="profile_running") from None
    except EngineUnavailable as exc:
        raise APIError(503, str(exc), code="engine_unavailable") from None
    except asyncio.TimeoutError:
        raise APIError(504, f"no engine step ran within timeout_s = {req.timeout_s:g} s: the profile covers the "
                       "next steps the engine runs; send it requests, then ask again", param="timeout_s",
                       code="profile_timeout") from None
    if "error" in doc:
        raise APIError(400, f"the step profile cannot run here: {doc['error']}", code="step_profile_unavailable")
    return JSONBytesResponse(doc)

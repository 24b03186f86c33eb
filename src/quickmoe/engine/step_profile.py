"""`EngineStepProfile`: where the GPU time of the steps an engine runs goes, by op family, while its loop runs them
(a server under load: POST /profile_steps, server/engine_core.py).

    profile = EngineStepProfile(engine)   # ValueError (the reason) where the engine's device is not CUDA
    ...engine.step(); profile.steps += 1  # the loop's own steps
    doc = profile.finish()                # executor.op_profile's summary, with "step_kinds"

The trace (executor/op_profile.py) holds the CUDA kernels of the steps launched between the two calls, both of which
synchronize the device. "step_kinds": {kind: {"steps", "tokens"}} of those steps, from the engine's step timer
when it runs (a server's always does; None otherwise), so a profile taken under load says whether its steps were
decode, mixed or prefill steps.
"""

from __future__ import annotations

from quickmoe.executor.op_profile import StepProfile
from quickmoe.executor.step_totals import STEP_KINDS

__all__ = ["EngineStepProfile", "MAX_PROFILE_STEPS"]

MAX_PROFILE_STEPS = 64  # steps one profile may cover (a trace of a few hundred kernels a step)


class EngineStepProfile:
    """A torch.profiler trace over an engine's next steps (see the module docstring); the caller counts the steps
    it ran in `steps`."""

    def __init__(self, engine) -> None:
        device = engine.runner.device
        if device.type != "cuda":
            raise ValueError(f"the step profile traces CUDA kernels; this engine runs on {device.type}")
        timer = engine.runner.step_timer
        self._timer = timer if timer.enabled else None
        self._trace = StepProfile()
        self._trace.start()  # synchronizes: every earlier step has finished, so the totals below hold them all
        self._before = self._timer.totals() if self._timer is not None else None
        self.steps = 0

    def finish(self) -> dict:
        """End the trace (synchronizes) and summarize it over `steps` (>= 1) steps."""
        if self.steps < 1:
            raise ValueError("the step profile ran no step")
        doc = self._trace.stop(self.steps)
        doc["step_kinds"] = None
        if self._timer is not None:
            after, before = self._timer.totals(), self._before
            kinds = {kind: {"steps": after.steps.get(kind, 0) - before.steps.get(kind, 0),
                            "tokens": after.tokens.get(kind, 0) - before.tokens.get(kind, 0)} for kind in STEP_KINDS}
            doc["step_kinds"] = {kind: k for kind, k in kinds.items() if k["steps"]}
        return doc

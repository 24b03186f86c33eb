"""quickmoe: a serving engine for Mixture-of-Experts LLMs (gpt-oss first), ready to serve in seconds."""

import time as _time

# The clock of the StartupReport's `imports` phase starts here, at quickmoe's first line.
_IMPORT_PERF_COUNTER = _time.perf_counter()

__version__ = "0.1.0"


def __getattr__(name: str):
    # LLM and SamplingParams import torch: load them on first use so `quickmoe --help` stays fast.
    if name == "LLM":
        from quickmoe.llm import LLM

        return LLM
    if name == "SamplingParams":
        from quickmoe.engine.sampling_params import SamplingParams

        return SamplingParams
    raise AttributeError(f"module 'quickmoe' has no attribute {name!r}")


__all__ = ["LLM", "SamplingParams", "__version__"]

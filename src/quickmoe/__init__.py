"""quickmoe: a serving engine for Mixture-of-Experts LLMs (gpt-oss first), ready to serve in seconds."""

__version__ = "0.1.0"

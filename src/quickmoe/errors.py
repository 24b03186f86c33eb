"""Typed errors. Each message names the culprit (file, tensor, field or value) and what was expected.

The CLI prints a `QuickMoEError` as one line, without a traceback; anything else is a bug.
"""


class QuickMoEError(Exception):
    """Base class of every error quickmoe raises on bad input."""


class ConfigError(QuickMoEError):
    """A config.json field, an engine option or a CLI flag is missing or invalid."""


class CheckpointError(QuickMoEError):
    """A checkpoint directory, index, shard or tensor does not match what the model expects."""


class TokenizerError(QuickMoEError):
    """The tokenizer files are missing or invalid, or a text/token cannot be encoded/decoded."""


class RequestError(QuickMoEError):
    """A generation request (prompt, sampling parameters) is invalid."""

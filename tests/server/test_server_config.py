"""ServerConfig rejects every invalid option with a message naming it, and is frozen."""

from __future__ import annotations

import dataclasses

import pytest

from quickmoe.errors import ConfigError
from quickmoe.server.config import ServerConfig


@pytest.mark.parametrize("field,value", [
    ("host", ""), ("host", "127.0.0.1 "), ("host", None), ("port", -1), ("port", 65536), ("port", "8000"),
    ("port", True), ("api_key", ""), ("api_key", "two words"), ("max_waiting", 0), ("max_waiting", 1.5),
    ("served_model_name", " "), ("drain_timeout_s", 0), ("drain_timeout_s", float("inf")),
    ("max_body_bytes", 10), ("access_log", "yes"),
])
def test_invalid_options_are_rejected_naming_the_field(field, value):
    with pytest.raises(ConfigError, match=f"server option {field} = "):
        ServerConfig(**{field: value})


def test_defaults_listen_on_localhost_only_and_the_config_is_frozen():
    config = ServerConfig()
    assert (config.host, config.port, config.api_key, config.url) == ("127.0.0.1", 8000, None, "http://127.0.0.1:8000")
    assert ServerConfig(host="::1", port=9).url == "http://[::1]:9"
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.port = 1

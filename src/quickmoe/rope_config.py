"""RoPE's parameters read from a config.json: `RopeScaling` and `parse_rope`, both spellings transformers writes
(`rope_scaling` with a top-level `rope_theta`, or transformers 5's `rope_parameters`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from quickmoe.config_fields import field_error, read_field

__all__ = ["ROPE_TYPES", "RopeScaling", "parse_rope"]

ROPE_TYPES = ("yarn", "default")


@dataclass(frozen=True)
class RopeScaling:
    """RoPE parameters: NeoX half-split rotation with `rope_theta`; `rope_type` "yarn" (gpt-oss, long-context
    Qwen) blends interpolated and extrapolated frequencies over a ramp and scales cos/sin by `attention_factor`."""

    rope_theta: float
    rope_type: str = "yarn"
    factor: float = 1.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    original_max_position_embeddings: int = 4096
    truncate: bool = True
    attention_factor: float | None = None

    @property
    def cos_sin_scale(self) -> float:
        """Factor on cos/sin: explicit `attention_factor`, else YaRN's 0.1*ln(factor)+1 (1 when factor <= 1)."""
        if self.attention_factor is not None:
            return self.attention_factor
        if self.rope_type != "yarn" or self.factor <= 1:
            return 1.0
        return 0.1 * math.log(self.factor) + 1.0



def parse_rope(raw: dict, source: str, default_theta: float) -> RopeScaling:
    """Accept both spellings: `rope_scaling` + top-level `rope_theta` (published gpt-oss), or
    `rope_parameters` holding `rope_theta` (transformers 5)."""
    if raw.get("rope_parameters") is not None:
        params = read_field(raw, "rope_parameters", dict, source)
        prefix = "rope_parameters"
        theta_src, theta_name = params, "rope_theta"
    else:
        params = read_field(raw, "rope_scaling", dict, source, default=None) or {"rope_type": "default"}
        prefix = "rope_scaling"
        theta_src, theta_name = raw, "rope_theta"
    sub = f"{source} ({prefix})" if theta_src is params else source
    theta = read_field(theta_src, theta_name, float, sub, default=default_theta, positive=True)
    psrc = f"{source} ({prefix})"
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in ROPE_TYPES:
        raise field_error(f"{prefix}.rope_type", rope_type, f"one of {list(ROPE_TYPES)}", source)
    if rope_type == "default":
        return RopeScaling(rope_theta=theta, rope_type="default")
    return RopeScaling(
        rope_theta=theta,
        rope_type=rope_type,
        factor=read_field(params, "factor", float, psrc, positive=True),
        beta_fast=read_field(params, "beta_fast", float, psrc, default=32.0, positive=True),
        beta_slow=read_field(params, "beta_slow", float, psrc, default=1.0, positive=True),
        original_max_position_embeddings=read_field(params, "original_max_position_embeddings", int, psrc,
                                              positive=True),
        truncate=read_field(params, "truncate", bool, psrc, default=True),
        attention_factor=read_field(params, "attention_factor", float, psrc, default=None),
    )

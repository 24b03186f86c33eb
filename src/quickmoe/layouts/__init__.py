"""Checkpoint layout -> kernel layout transforms, and the PermutationCache that applies them."""

from quickmoe.layouts.mxfp4_moe import Mxfp4MoELayout, convert_experts_, dequantize_expert, split_gate_up
from quickmoe.layouts.permutation_cache import (PermutationCache, PermutationCacheStats, Transform,
                                                default_permutation_cache)

__all__ = ["Mxfp4MoELayout", "PermutationCache", "PermutationCacheStats", "Transform", "convert_experts_",
           "default_permutation_cache", "dequantize_expert", "split_gate_up"]

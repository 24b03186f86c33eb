"""Kernels, one op per module: the Triton kernel `x` beside its torch reference `x_ref` (same signature).

routing: `route` / `route_ref` (Triton written); fused_moe: `fused_moe_ref` (its Triton kernels arrive with
the MoE issue). Parity tests live in tests/kernels/ and run in Triton's interpreter without a GPU.
"""

"""Kernels, one op per module: the Triton kernel `x` beside its torch reference `x_ref` (same signature).

Only the torch references exist so far; the Triton kernels arrive with the MoE and attention issues.
"""

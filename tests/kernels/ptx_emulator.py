"""A small emulator of the straight-line PTX in our inline-assembly kernels' helpers (32-bit logic ops, shifts,
`prmt` with its sign-replicate mode, `mad.lo.u32`, `fma.rn.bf16x2`, `mul.rn.bf16x2`), so the CPU tests can check that text, which Triton's
interpreter cannot run, against its definition. Registers are Python ints; bf16 rounds to nearest even."""

from __future__ import annotations

import struct

import numpy as np


def bf16_to_float(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]


def float_to_bf16(value: float) -> int:
    u = struct.unpack("<I", struct.pack("<f", np.float32(value)))[0]
    if (u & 0x7F800000) == 0x7F800000:  # inf / nan: truncate
        return (u >> 16) & 0xFFFF
    u += 0x7FFF + ((u >> 16) & 1)
    return (u >> 16) & 0xFFFF


def prmt(a: int, b: int, c: int) -> int:
    """PTX prmt.b32 (default mode): byte i of the result is byte c[i] & 7 of {b, a} (a: 0-3, b: 4-7), or
    that byte's top bit replicated when c[i] & 8."""
    source = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = 0
    for i in range(4):
        selector = (c >> (4 * i)) & 0xF
        byte = source[selector & 7]
        if selector & 8:
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << (8 * i)
    return out


def run(asm: str, operands: list[int]) -> dict[str, int]:
    """Runs `asm` with $0, $1, ... bound to `operands` (outputs included); returns every register."""
    regs = {f"${i}": v for i, v in enumerate(operands)}

    def value(token: str) -> int:
        token = token.strip()
        return regs[token] if token in regs else int(token, 0)

    for line in asm.splitlines():
        line = line.strip().rstrip(";")
        if not line or line in "{}" or line.startswith((".reg", "//")):
            continue
        op, rest = line.split(None, 1)
        args = [a.strip() for a in rest.split(",")]
        if op == "mov.b32":
            result = value(args[1])
        elif op == "and.b32":
            result = value(args[1]) & value(args[2])
        elif op == "or.b32":
            result = value(args[1]) | value(args[2])
        elif op == "shl.b32":
            result = value(args[1]) << value(args[2])
        elif op == "shr.u32":
            result = value(args[1]) >> value(args[2])
        elif op == "prmt.b32":
            result = prmt(value(args[1]), value(args[2]), value(args[3]))
        elif op == "mad.lo.u32":
            result = value(args[1]) * value(args[2]) + value(args[3])
        elif op == "mul.rn.bf16x2":
            a, b = (value(x) for x in args[1:3])
            result = 0
            for half in range(2):
                exact = bf16_to_float(a >> 16 * half) * bf16_to_float(b >> 16 * half)
                result |= float_to_bf16(exact) << 16 * half
        elif op == "fma.rn.bf16x2":
            a, b, c = (value(x) for x in args[1:4])
            result = 0
            for half in range(2):
                exact = bf16_to_float(a >> 16 * half) * bf16_to_float(b >> 16 * half) + bf16_to_float(c >> 16 * half)
                result |= float_to_bf16(exact) << 16 * half
        else:
            raise ValueError(f"ptx_emulator: no emulation for {op!r}")
        regs[args[0]] = result & 0xFFFFFFFF
    return regs

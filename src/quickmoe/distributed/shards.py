"""Which part of a dimension a rank holds: contiguous, in units a format dictates (a 32-element MXFP4 scale
block, a 128-wide FP8 block), as evenly as the units allow. Errors name the field, its value and what was
expected."""

from __future__ import annotations

from dataclasses import dataclass

from quickmoe.errors import ConfigError

__all__ = ["Shard", "even_shard", "split_sizes"]


@dataclass(frozen=True)
class Shard:
    """Elements [start, start + size) of a dimension of `total` elements."""

    start: int
    size: int
    total: int

    @property
    def stop(self) -> int:
        return self.start + self.size

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.size == self.total


def split_sizes(total: int, parts: int, *, unit: int = 1, field: str = "size") -> list[int]:
    """`total` split into `parts` contiguous sizes, each a multiple of `unit`, the first ones one unit larger
    when the units do not divide evenly. ConfigError when total is not a multiple of unit, or there are fewer
    units than parts."""
    if parts < 1:
        raise ConfigError(f"{field}: cannot split into {parts} parts (expected at least 1)")
    if total % unit:
        raise ConfigError(f"{field} = {total}: expected a multiple of {unit} to split across {parts} ranks")
    units = total // unit
    if units < parts:
        raise ConfigError(f"{field} = {total} holds {units} block(s) of {unit}: fewer than the {parts} ranks "
                          f"that must share it (expected at most {units} ranks)")
    base, extra = divmod(units, parts)
    return [(base + (1 if i < extra else 0)) * unit for i in range(parts)]


def even_shard(total: int, rank: int, parts: int, *, field: str, unit: int = 1, exact: bool = False) -> Shard:
    """Rank `rank`'s contiguous share of `total` (see split_sizes). `exact`: parts must divide the units evenly
    (attention heads, experts), else ConfigError naming `field`."""
    if exact and (total % unit or (total // unit) % parts):
        raise ConfigError(f"{field} = {total}: expected a multiple of {parts * unit} (split evenly across "
                          f"{parts} ranks{f' in blocks of {unit}' if unit > 1 else ''}); choose a "
                          f"tensor-parallel size that divides it")
    sizes = split_sizes(total, parts, unit=unit, field=field)
    return Shard(sum(sizes[:rank]), sizes[rank], total)

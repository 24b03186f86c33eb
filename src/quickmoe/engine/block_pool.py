"""One cache group's block ids with reference counts and the prefix cache's index (automatic prefix caching).

A block is held while at least one sequence's table holds it (reference count > 0). A full block whose K/V was
computed is *registered* under its key (the hash of its tokens and of the key of the block before it,
`block_key`), so a later sequence with the same tokens up to there can take it instead of recomputing it. A
block whose count falls to 0 is free but keeps its key: it is evicted (its key forgotten) only when a block is
taken and no never-registered free block is left, least recently freed first (LRU among the blocks no running
sequence holds). Plain free blocks are handed out LIFO (recently freed blocks are warm in the device's caches).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

__all__ = ["BlockPool", "NoFreeBlocks", "block_key"]


class NoFreeBlocks(RuntimeError):
    """The pool cannot give the blocks asked for (the scheduler preempts or waits)."""


def block_key(parent: int | None, tokens: Sequence[int]) -> int:
    """The key of a full block: its tokens and, through `parent` (the key of the block before it, None for the
    first), every token before it."""
    return hash((parent, tuple(tokens)))


class BlockPool:
    """`num_blocks` block ids, 0..num_blocks-1."""

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 1:
            raise ValueError(f"num_blocks = {num_blocks}: expected >= 1")
        self.num_blocks = num_blocks
        self._plain = list(range(num_blocks - 1, -1, -1))  # free, never registered (or evicted): pop() is LIFO
        self._cached_free: OrderedDict[int, None] = OrderedDict()  # free and registered, least recently freed first
        self._refs = [0] * num_blocks
        self._key_of: list[int | None] = [None] * num_blocks
        self._by_key: dict[int, int] = {}
        self.num_evictions = 0

    @property
    def num_free(self) -> int:
        """Blocks no sequence holds (registered ones included: they are evicted when needed)."""
        return len(self._plain) + len(self._cached_free)

    @property
    def num_cached(self) -> int:
        return len(self._by_key)

    def take(self, count: int) -> list[int]:
        if count > self.num_free:
            raise NoFreeBlocks(f"{count} blocks asked, {self.num_free} free of {self.num_blocks}")
        blocks = []
        for _ in range(count):
            if self._plain:
                block = self._plain.pop()
            else:
                block, _ = self._cached_free.popitem(last=False)  # the least recently freed
                del self._by_key[self._key_of[block]]
                self._key_of[block] = None
                self.num_evictions += 1
            self._refs[block] = 1
            blocks.append(block)
        return blocks

    def give_back(self, blocks: Iterable[int]) -> None:
        """Drop one reference to each block; a block no sequence holds any more becomes free (keeping its key)."""
        for b in blocks:
            if self._refs[b] == 0:
                raise ValueError(f"block {b} freed twice")
            self._refs[b] -= 1
            if self._refs[b] == 0:
                if self._key_of[b] is None:
                    self._plain.append(b)
                else:
                    self._cached_free[b] = None

    def num_freed_by(self, blocks: Iterable[int]) -> int:
        """How many of `blocks` (distinct, held) `give_back` would make free: those no other sequence holds."""
        return sum(1 for b in blocks if self._refs[b] == 1)

    def lookup(self, key: int) -> int | None:
        """The registered block of `key`, held or free, or None."""
        return self._by_key.get(key)

    def share(self, block: int) -> None:
        """One more reference to a registered block (a prefix cache hit); a free one stops being free."""
        if self._refs[block] == 0:
            del self._cached_free[block]
        self._refs[block] += 1

    def register(self, block: int, key: int) -> None:
        """Index a held block whose K/V is now computed under `key` (no-op when the key or block already is)."""
        if key in self._by_key or self._key_of[block] is not None:
            return
        assert self._refs[block] > 0, "only held blocks are registered"
        self._by_key[key] = block
        self._key_of[block] = key

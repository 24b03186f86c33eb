"""The block manager's tables kept as rows of one numpy array per cache group, so a step's padded tables are one
gather rather than a Python loop over its sequences.

A step hands the runner every scheduled sequence's block table in every group, padded with -1 to the longest
(`KVBlockManager.step_block_tables`). Built from the per-sequence Python lists, that cost the host ~4 us a sequence
and a group (1.9-2.1 ms a step at batch 256 with two groups on the H200's host; 0.12 ms now, docs/benchmarks.md).
Here each held sequence owns one row in every group's array ([rows, columns] int32, -1 where no block is), written
as blocks are taken or released; the step's tables are `array[rows, :width]`.

Rows and columns grow by doubling (a sequence longer than any before widens every row); a freed row is cleared
and reused.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["BlockTableRows"]

_NO_BLOCK = -1


class BlockTableRows:
    """One [rows, columns] int32 array per group; `lengths[g][row]` is the table length of the row's sequence."""

    def __init__(self, num_groups: int, *, rows: int = 16, columns: int = 64) -> None:
        self.num_groups = num_groups
        self.tables = [np.full((rows, columns), _NO_BLOCK, dtype=np.int32) for _ in range(num_groups)]
        self.lengths = [np.zeros(rows, dtype=np.int64) for _ in range(num_groups)]
        self._free = list(range(rows - 1, -1, -1))  # pop() hands out the lowest row first

    @property
    def capacity(self) -> tuple[int, int]:
        return self.tables[0].shape

    def acquire(self) -> int:
        """A cleared row for a new sequence."""
        if not self._free:
            rows, columns = self.capacity
            self._resize(2 * rows, columns)
            self._free = list(range(2 * rows - 1, rows - 1, -1))
        return self._free.pop()

    def release(self, row: int) -> None:
        """Clear `row` and hand it back."""
        for table, lengths in zip(self.tables, self.lengths):
            table[row, :lengths[row]] = _NO_BLOCK
            lengths[row] = 0
        self._free.append(row)

    def write(self, row: int, group: int, start: int, blocks: Sequence[int]) -> None:
        """Entries [start, start + len(blocks)) of `row`'s table in `group`; the table's length becomes at least
        their end."""
        blocks = np.asarray(blocks, dtype=np.int32)
        end = start + len(blocks)
        if end > self.capacity[1]:
            self._resize(self.capacity[0], max(end, 2 * self.capacity[1]))
        self.tables[group][row, start:end] = blocks
        self.lengths[group][row] = max(self.lengths[group][row], end)

    def gather(self, rows: np.ndarray) -> list[np.ndarray]:
        """Per group, the tables of `rows` in that order: a new [len(rows), width] int32 array, width the longest
        of them (at least 1), -1 past each table's end."""
        out = []
        for table, lengths in zip(self.tables, self.lengths):
            width = max(int(lengths[rows].max(initial=0)), 1)
            out.append(table[rows, :width])  # [B, width] (advanced indexing: a copy)
        return out

    def _resize(self, rows: int, columns: int) -> None:
        old_rows, old_columns = self.capacity
        for g in range(self.num_groups):
            table = np.full((rows, columns), _NO_BLOCK, dtype=np.int32)
            table[:old_rows, :old_columns] = self.tables[g]
            self.tables[g] = table
            lengths = np.zeros(rows, dtype=np.int64)
            lengths[:old_rows] = self.lengths[g]
            self.lengths[g] = lengths

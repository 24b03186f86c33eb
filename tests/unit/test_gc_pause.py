"""startup/gc_pause.py: the collector is off inside the block and back to its previous state after (also after
an error), and never switched on by it when it was off."""

from __future__ import annotations

import gc

import pytest

from quickmoe.startup.gc_pause import paused_gc


def test_the_collector_is_paused_inside_and_restored_after():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("a failed start")
    assert gc.isenabled()


def test_a_collector_left_off_stays_off():
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()

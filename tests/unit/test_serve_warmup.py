"""`quickmoe serve --warmup`: when the engine's idle work (deferred decode graphs, MoE kernels of prefill sizes)
runs before the server reports ready."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from quickmoe.cli.commands import _warm_up_before_ready, warms_up_before_ready


@pytest.mark.parametrize("mode,compiled,want", [
    ("lazy", 0, False), ("lazy", 40, False),  # while idle, or at first use
    ("eager", 0, True), ("eager", 40, True),
    ("auto", 0, False),  # a warm kernel cache: the idle work only loads kernels, nothing to wait for
    ("auto", 1, True), ("auto", 40, True),  # start-up compiled: so would the idle work
])
def test_the_warmup_modes(mode, compiled, want):
    assert warms_up_before_ready(mode, compiled) is want


def test_auto_is_the_default():
    """Measured best on the H100 (docs/benchmarks.md, 2026-11-28 second session): on an empty kernel cache lazy
    stalled the first requests 22 s in all, auto none; on a warm cache both are ready at the same time."""
    from quickmoe.cli.parser import build_parser

    assert build_parser().parse_args(["serve", "some/dir"]).warmup == "auto"


@pytest.mark.parametrize("mode,compiled,pieces_done", [("eager", 0, 3), ("auto", 7, 3), ("auto", 0, 0),
                                                       ("lazy", 7, 0)])
def test_the_idle_work_runs_to_its_end_before_ready_when_asked(mode, compiled, pieces_done):
    left = [3]

    def idle_work():  # three pieces, then none
        if left[0] == 0:
            return False
        left[0] -= 1
        return True

    from quickmoe.engine.engine import Engine

    engine = SimpleNamespace(idle_work=idle_work)
    engine.finish_idle_work = lambda: Engine.finish_idle_work(engine)
    llm = SimpleNamespace(engine=engine,
                          runner=SimpleNamespace(kernel_cache=SimpleNamespace(info={"new_entries_startup": compiled})))
    _warm_up_before_ready(llm, mode)
    assert 3 - left[0] == pieces_done

"""startup/gc_pause.py: the collector is off inside the block and back to its previous state after (also after
an error), and never switched on by it when it was off; the frozen variant takes what the block made out of every
generation; QUICKMOE_STARTUP_GC is read and checked, and a start with it gives the same tokens. The serving heap's
freeze (HeapFreeze): once, only when armed, garbage cycles collected rather than frozen; the engine's idle work ends
with it; QUICKMOE_SERVING_GC is read and checked."""

from __future__ import annotations

import gc
import itertools

import pytest

from quickmoe.errors import ConfigError
from quickmoe.startup.gc_pause import HeapFreeze, paused_gc, paused_then_frozen_gc, serving_gc_frozen, startup_gc_paused


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


class _Node:
    """An object the collector tracks (it can hold a cycle)."""

    def __init__(self) -> None:
        self.other = self


def test_paused_then_frozen_moves_what_the_block_made_out_of_later_collections():
    gc.unfreeze()
    try:
        before = gc.get_freeze_count()
        with paused_then_frozen_gc():
            assert not gc.isenabled()
            kept = [_Node() for _ in range(1000)]  # what imports leave behind: long-lived objects
        assert gc.isenabled()
        assert gc.get_freeze_count() >= before + 1000
        assert not any(obj is kept[0] for obj in gc.get_objects())  # frozen: no generation scans it
    finally:
        gc.unfreeze()
    assert any(obj is kept[0] for obj in gc.get_objects())  # unfrozen again for the other tests


def test_an_error_in_the_block_freezes_nothing_and_restores_the_collector():
    gc.unfreeze()
    try:
        with pytest.raises(RuntimeError), paused_then_frozen_gc():
            raise RuntimeError("a failed import")
        assert gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("value,paused", [(None, True), ("normal", False), ("paused", True)])
def test_the_startup_switch(monkeypatch, value, paused):
    if value is None:
        monkeypatch.delenv("QUICKMOE_STARTUP_GC", raising=False)
    else:
        monkeypatch.setenv("QUICKMOE_STARTUP_GC", value)
    assert startup_gc_paused() is paused


def test_a_bad_startup_switch_names_the_variable_and_the_choices(monkeypatch):
    monkeypatch.setenv("QUICKMOE_STARTUP_GC", "off")
    with pytest.raises(ConfigError, match=r"QUICKMOE_STARTUP_GC='off': expected 'paused' \(the default\) or 'normal'"):
        startup_gc_paused()


def test_generate_with_the_switch_gives_the_same_text(tmp_path):
    """The embedded model, greedy: the same tokens with the collector paused and frozen through the imports."""
    import json
    import os
    import subprocess
    import sys

    def generate(switch: str) -> list[int]:
        env = {**os.environ, "QUICKMOE_STARTUP_GC": switch, "QUICKMOE_CACHE_DIR": str(tmp_path)}
        out = subprocess.run([sys.executable, "-m", "quickmoe", "generate", "--prompt", "def add(a, b):",
                              "--max-tokens", "8", "--temperature", "0", "--device", "cpu", "--json", "-q"],
                             env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])["token_ids"]

    assert generate("paused") == generate("normal")
    env = {**os.environ, "QUICKMOE_STARTUP_GC": "sometimes", "QUICKMOE_CACHE_DIR": str(tmp_path)}
    bad = subprocess.run([sys.executable, "-m", "quickmoe", "generate", "--prompt", "x", "--max-tokens", "1",
                          "--device", "cpu", "-q"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "QUICKMOE_STARTUP_GC='sometimes'" in bad.stderr and "Traceback" not in bad.stderr


def test_the_heap_freeze_collects_the_garbage_then_freezes_the_rest_once():
    import weakref

    gc.unfreeze()
    try:
        freeze = HeapFreeze()
        assert not freeze.run_once() and gc.get_freeze_count() == 0  # not armed: nothing
        kept = [_Node() for _ in range(1000)]  # the model's objects: long-lived
        garbage = _Node()  # a cycle nothing refers to: start-up's garbage
        dead = weakref.ref(garbage)
        del garbage
        freeze.armed = True
        assert freeze.run_once() and not freeze.armed
        assert dead() is None  # collected, not frozen (kept for the process's life)
        assert gc.get_freeze_count() >= 1000
        assert not any(obj is kept[-1] for obj in gc.get_objects())  # frozen: full passes no longer scan it
        assert not freeze.run_once()  # once
    finally:
        gc.unfreeze()


def test_a_cpu_engines_idle_work_ends_with_the_freeze_where_armed():
    from quickmoe.llm import LLM

    gc.unfreeze()
    try:
        llm = LLM(None, device="cpu", max_model_len=64)  # the embedded model

        def pieces() -> int:  # the engine's idle work, at most 5 pieces (a piece done forever would not end)
            return sum(1 for _ in itertools.takewhile(bool, (llm.engine.idle_work() for _ in range(5))))

        assert pieces() == 0 and gc.get_freeze_count() == 0  # a library's engine: not armed
        llm.engine.heap_freeze.armed = True
        assert pieces() == 1 and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("value,frozen", [(None, True), ("normal", False), ("frozen", True)])
def test_the_serving_switch(monkeypatch, value, frozen):
    if value is None:
        monkeypatch.delenv("QUICKMOE_SERVING_GC", raising=False)
    else:
        monkeypatch.setenv("QUICKMOE_SERVING_GC", value)
    assert serving_gc_frozen() is frozen
    monkeypatch.setenv("QUICKMOE_SERVING_GC", "off")
    with pytest.raises(ConfigError, match=r"QUICKMOE_SERVING_GC='off': expected 'frozen' \(the default\) or 'normal'"):
        serving_gc_frozen()


def test_a_full_pass_while_serving_scans_no_prompt_tokens():
    """Once the heap is frozen, a full pass of the collector scans what requests made: the prompts' tokens are a
    tuple of ints (not tracked) and the detokenizer joins its pieces every 32, so what a pass visits grows with the
    outputs only. Counted here as the elements of every tracked container, with the frozen start-up excluded; on
    the tree before (prompts in lists, one piece per token) 3,517 elements for six prompts of 400 tokens."""
    import random

    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    gc.unfreeze()
    try:
        engine = LLM(None, device="cpu", max_model_len=512).engine  # the embedded model
        while engine.idle_work():
            pass
        gc.collect()
        gc.freeze()  # as HeapFreeze does
        rng = random.Random()
        prompt_len, requests = 400, 6
        for i in range(requests):
            engine.add_request(f"r{i}", [rng.randrange(100, 4000) for _ in range(prompt_len)],
                               SamplingParams(max_tokens=80, temperature=0, ignore_eos=True))
        for _ in range(50):
            engine.step()
        gc.collect()
        running = engine.scheduler.running
        assert len(running) == requests and all(len(s.output_ids) >= 40 for s in running)
        assert not any(gc.is_tracked(s.prompt_ids) for s in running)
        visited = sum(len(o) for o in gc.get_objects() if isinstance(o, (list, tuple, dict, set)))
        assert visited < prompt_len * requests / 2
    finally:
        gc.unfreeze()


def test_llm_generate_keeps_its_prompts_out_of_the_full_passes():
    """`LLM.generate` (what `bench generate` times) holds each prompt as a tuple while the requests run and gives
    lists back: mid-run, with the heap frozen, the tracked containers hold no prompt's tokens (a list per prompt
    before, 2,400 elements for six prompts of 400 tokens)."""
    import random

    from quickmoe.engine.sampling_params import SamplingParams
    from quickmoe.llm import LLM

    gc.unfreeze()
    try:
        llm = LLM(None, device="cpu", max_model_len=512)  # the embedded model
        while llm.engine.idle_work():
            pass
        rng = random.Random()
        prompt_len, requests = 400, 6
        prompts = [tuple(rng.randrange(100, 4000) for _ in range(prompt_len)) for _ in range(requests)]
        visited = []
        step = llm.engine.step

        def counting_step():
            if len(visited) < 40:
                visited.append(None)
            elif len(visited) == 40:  # mid-run: every request has its prompt computed and some outputs
                gc.collect()
                visited.append(sum(len(o) for o in gc.get_objects() if isinstance(o, (list, tuple, dict, set))))
            return step()

        gc.collect()
        gc.freeze()  # as HeapFreeze does
        llm.engine.step = counting_step
        outs = llm.generate(prompts, SamplingParams(max_tokens=60, temperature=0, ignore_eos=True))
        assert visited[-1] is not None and visited[-1] < prompt_len * requests / 2
        assert [o.prompt_token_ids for o in outs] == [list(p) for p in prompts]  # lists, as before
        assert all(len(o.token_ids) == 60 for o in outs)
    finally:
        gc.unfreeze()

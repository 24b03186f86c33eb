"""Triton's version key kept in quickmoe's cache (executor/triton_key.py). A fresh process stores the key Triton
computes; the next one reads it without hashing libtriton (Triton's own function is never called); the key is
Triton's string exactly. The stamp changes with any key file's size or mtime and with a new file. Each start is a
fresh interpreter: triton_key is computed once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from quickmoe.executor.triton_key import key_stamp

triton = pytest.importorskip("triton")

_START = r"""
import json, sys, time
from triton.runtime import cache as triton_cache
original = triton_cache.triton_key
from quickmoe.executor.triton_key import use_cached_triton_key
outcome = use_cached_triton_key()
again = use_cached_triton_key()
t = time.perf_counter()
key = triton_cache.get_cache_key.__globals__["triton_key"]()  # what Triton's get_cache_key calls
seconds = time.perf_counter() - t
print(json.dumps(dict(outcome=outcome, again=again, key=key, seconds=seconds,
                      original_ran=original.cache_info().currsize > 0,
                      replaced=triton_cache.triton_key is not original)))
"""


def _start(cache: Path, switch: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "QUICKMOE_TRITON_KEY_CACHE"}
    env["QUICKMOE_CACHE_DIR"] = str(cache)
    if switch is not None:
        env["QUICKMOE_TRITON_KEY_CACHE"] = switch
    out = subprocess.run([sys.executable, "-c", _START], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def triton_own_key() -> str:
    """Triton's key computed by Triton alone, in a fresh process: this one may hold quickmoe's stand-in already
    (any in-process start installs it, the default)."""
    code = "from triton.runtime.cache import triton_key; print(triton_key())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_the_first_start_stores_triton_key_and_the_next_reads_it(tmp_path, triton_own_key):
    first = _start(tmp_path, "1")
    assert first["outcome"] == "miss" and first["again"] == "miss" and first["replaced"]
    assert first["original_ran"] and first["key"] == triton_own_key
    stored = list((tmp_path / "triton-key").glob("*.txt"))
    assert len(stored) == 1 and stored[0].read_text() == triton_own_key
    second = _start(tmp_path, "1")
    assert second["outcome"] == "cached" and second["key"] == triton_own_key
    assert not second["original_ran"]  # libtriton was not hashed


def test_an_empty_or_unreadable_stored_key_is_a_miss(tmp_path, triton_own_key):
    _start(tmp_path, "1")
    (stored,) = (tmp_path / "triton-key").glob("*.txt")
    stored.write_text("")
    again = _start(tmp_path, "1")
    assert again["outcome"] == "miss" and again["key"] == triton_own_key and stored.read_text() == triton_own_key


def test_on_by_default_and_off_when_switched_off(tmp_path, triton_own_key):
    got = _start(tmp_path, "0")
    assert got["outcome"] == "off" and not got["replaced"] and got["key"] == triton_own_key
    assert not (tmp_path / "triton-key").exists()
    first, second = _start(tmp_path, None), _start(tmp_path, None)
    assert first["outcome"] == "miss" and second["outcome"] == "cached" and second["key"] == triton_own_key
    assert not second["original_ran"]


def test_a_bad_switch_names_the_variable_and_the_choices(tmp_path, monkeypatch):
    from quickmoe.errors import ConfigError
    from quickmoe.executor.triton_key import use_cached_triton_key

    monkeypatch.setenv("QUICKMOE_TRITON_KEY_CACHE", "on")
    with pytest.raises(ConfigError, match=r"QUICKMOE_TRITON_KEY_CACHE='on': expected '1' .* or '0'"):
        use_cached_triton_key()


def test_the_stamp_follows_every_key_file(tmp_path):
    root = tmp_path / "triton"
    for rel in ("runtime/cache.py", "_C/libtriton.so", "compiler/compiler.py", "backends/nvidia/driver.py",
                "language/core.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    cache_py = root / "runtime" / "cache.py"
    (root / "_C" / "libtriton.so").rename(root / "_C" / f"libtriton.{_ext()}")

    def stamp() -> str:
        return key_stamp("3.6.0", root, cache_py)

    base = stamp()
    assert stamp() == base and key_stamp("3.6.1", root, cache_py) != base
    seen = {base}
    for rel in ("compiler/compiler.py", "backends/nvidia/driver.py", "language/core.py", "runtime/cache.py",
                f"_C/libtriton.{_ext()}"):
        path = root / rel
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # touched: a new mtime
        seen.add(stamp())
    assert len(seen) == 6  # each touch gave a new stamp
    (root / "backends" / "nvidia" / "new_module.py").write_text("x = 1")
    with_new = stamp()
    assert with_new not in seen
    (root / "language" / "core.cpython-311.pyc").write_bytes(b"bytecode")  # bytecode is not part of the key
    assert stamp() == with_new


def _ext() -> str:
    import sysconfig

    return sysconfig.get_config_var("EXT_SUFFIX").split(".")[-1]


def test_inductor_imported_first_gets_the_stored_key_too(tmp_path, triton_own_key):
    _start(tmp_path, "1")
    code = ("import torch._inductor.runtime.triton_compat as compat; from triton.runtime import cache; "
            "original = cache.triton_key; "
            "from quickmoe.executor.triton_key import use_cached_triton_key; print(use_cached_triton_key()); "
            "print(compat.triton_key is cache.triton_key, compat.triton_key() == cache.triton_key(), "
            "original.cache_info().currsize)")
    env = {**os.environ, "QUICKMOE_CACHE_DIR": str(tmp_path), "QUICKMOE_TRITON_KEY_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cached", "True", "True", "0"]


"""torch's source key kept in quickmoe's cache (executor/torch_key.py). A fresh process stores the key Inductor
computes; the next one is given it without hashing torch's sources (torch's hashing never runs); the key is torch's
bytes exactly, which the test computes itself from torch's files as Inductor defines it. The stamp changes with any
module file's size or mtime and with a new module file. Each start is a fresh interpreter: torch_key is computed
once per process."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from quickmoe.errors import ConfigError
from quickmoe.executor.torch_key import torch_key_stamp, use_cached_torch_key

_START = r"""
import json, sys, base64
from torch._inductor import codecache
hashed = []
original_build = codecache.build_code_hash
def counting_build(*args, **kwargs):
    hashed.append(1)
    return original_build(*args, **kwargs)
codecache.build_code_hash = counting_build  # torch_key's hashing of the sources goes through it
from quickmoe.executor.torch_key import use_cached_torch_key
outcome = use_cached_torch_key()
again = use_cached_torch_key()
key = codecache.torch_key()  # what Inductor's cache keys call
print(json.dumps(dict(outcome=outcome, again=again, key=base64.b64encode(key).decode(), hashed=bool(hashed))))
"""


def _start(cache: Path, switch: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "QUICKMOE_TORCH_KEY_CACHE"}
    env["QUICKMOE_CACHE_DIR"] = str(cache)
    if switch is not None:
        env["QUICKMOE_TORCH_KEY_CACHE"] = switch
    done = subprocess.run([sys.executable, "-c", _START], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _hash_modules(roots: list[str], prefix: str, hasher) -> None:
    for module in sorted(pkgutil.iter_modules(roots, prefix), key=lambda m: m.name):
        spec = module.module_finder.find_spec(module.name, None)
        hasher.update(spec.name.encode())
        hasher.update(Path(spec.origin).read_bytes())
        if module.ispkg:
            _hash_modules(spec.submodule_search_locations, f"{spec.name}.", hasher)


@pytest.fixture(scope="module")
def torch_own_key() -> bytes:
    """The key as Inductor defines it (torch/_inductor/codecache.py, outside fbcode): sha256 of the version, then
    of every module under torch's directory (name, then bytes), then of two of Inductor's runtime files."""
    root = Path(torch.__file__).resolve().parent
    hasher = hashlib.sha256(torch.__version__.encode())
    _hash_modules([str(root)], "", hasher)
    for extra in ("codegen/aoti_runtime/interface.cpp", "script.ld"):
        path = root / "_inductor" / extra
        if path.exists():
            hasher.update(path.read_bytes())
    return hasher.digest()


def test_the_first_start_stores_torchs_key_and_the_next_is_given_it(tmp_path, torch_own_key):
    first = _start(tmp_path)
    assert first["outcome"] == "miss" and first["hashed"]
    assert base64.b64decode(first["key"]) == torch_own_key
    stored = list((tmp_path / "torch-key").glob("*.txt"))
    assert len(stored) == 1 and base64.b64decode(stored[0].read_text()) == torch_own_key
    second = _start(tmp_path)
    assert second["outcome"] == "cached" and second["again"] in ("cached", "computed already")
    assert not second["hashed"]  # torch's sources were not read
    assert base64.b64decode(second["key"]) == torch_own_key


def test_a_corrupt_stored_key_is_a_miss_and_is_replaced(tmp_path, torch_own_key):
    _start(tmp_path)
    (stored,) = (tmp_path / "torch-key").glob("*.txt")
    stored.write_text("not base64 at all!")
    again = _start(tmp_path)
    assert again["outcome"] == "miss" and again["hashed"] and base64.b64decode(again["key"]) == torch_own_key
    assert base64.b64decode(stored.read_text()) == torch_own_key


def test_off_when_switched_off(tmp_path, torch_own_key):
    off = _start(tmp_path, switch="0")
    assert off["outcome"] == "off" and off["hashed"] and base64.b64decode(off["key"]) == torch_own_key
    assert not (tmp_path / "torch-key").exists()


def test_a_bad_switch_names_the_variable_and_the_choices(monkeypatch):
    monkeypatch.setenv("QUICKMOE_TORCH_KEY_CACHE", "yes")
    with pytest.raises(ConfigError, match=r"QUICKMOE_TORCH_KEY_CACHE='yes'.*'1'.*'0'"):
        use_cached_torch_key()


def test_the_stamp_follows_every_module_file(tmp_path):
    root = tmp_path / "torch"
    (root / "_inductor" / "codegen" / "aoti_runtime").mkdir(parents=True)
    (root / "__init__.py").write_text("x = 1\n")
    (root / "_inductor" / "__init__.py").write_text("")
    (root / "_C.so").write_bytes(b"\0" * 8)
    (root / "_inductor" / "script.ld").write_text("ld\n")
    base = torch_key_stamp("2.0", root)
    assert torch_key_stamp("2.0", root) == base
    assert torch_key_stamp("2.1", root) != base  # the version
    (root / "__init__.py").write_text("x = 22\n")  # size
    edited = torch_key_stamp("2.0", root)
    assert edited != base
    os.utime(root / "_C.so", ns=(1, 1))  # mtime of an extension module
    touched = torch_key_stamp("2.0", root)
    assert touched != edited
    (root / "_inductor" / "new_module.py").write_text("")  # a new module
    assert torch_key_stamp("2.0", root) != touched
    before = torch_key_stamp("2.0", root)
    (root / "_inductor" / "codegen" / "aoti_runtime" / "interface.cpp").write_text("//\n")  # Inductor's extra file
    assert torch_key_stamp("2.0", root) != before
    before = torch_key_stamp("2.0", root)
    (root / "_inductor" / "__pycache__").mkdir()
    (root / "_inductor" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"bytecode")  # not a source
    (root / "notes.txt").write_text("not a module")
    assert torch_key_stamp("2.0", root) == before

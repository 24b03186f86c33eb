"""The bytecode cache (startup/bytecode_cache.py): where torch ships no bytecode and Python may not write any, the
`quickmoe` command compiles it once under its cache and later starts read it from there; everywhere else nothing
changes. Each case runs in a fresh interpreter with a stand-in `torch` package (random contents, no bytecode)
first on its path, so the real installation is never touched."""

from __future__ import annotations

import compileall
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from quickmoe.cli import main

SRC = str(Path(__file__).resolve().parents[2] / "src")
PROBE = """
import json, os, subprocess, sys
from quickmoe.startup.bytecode_cache import enable_bytecode_cache
path = enable_bytecode_cache()
import torch, torch.ops_table  # the stand-in
child = subprocess.run([sys.executable, "-c", "import sys; print(sys.pycache_prefix, sys.flags.dont_write_bytecode)"],
                       capture_output=True, text=True, check=True).stdout.split()
print(json.dumps({"path": path and str(path), "prefix": sys.pycache_prefix, "value": torch.VALUE,
                  "table": torch.ops_table.TABLE, "env_prefix": os.environ.get("PYTHONPYCACHEPREFIX"),
                  "env_no_write": os.environ.get("PYTHONDONTWRITEBYTECODE"), "child": child}))
"""


def _stand_in_torch(root: Path) -> Path:
    package = root / "site" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"VALUE = {random.randrange(10**9)}\n")
    (package / "ops_table.py").write_text(f"TABLE = {[random.random() for _ in range(50)]!r}\n")
    return package


def _run(root: Path, *flags: str, **env: str) -> tuple[dict, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "QUICKMOE_BYTECODE_CACHE")}
    full = {**base, "PYTHONPATH": os.pathsep.join([str(root / "site"), SRC]), "PYTHONDONTWRITEBYTECODE": "1",
            "QUICKMOE_CACHE_DIR": str(root / "cache"), **env}
    proc = subprocess.run([sys.executable, *flags, "-c", PROBE], capture_output=True, text=True, env=full,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_missing_bytecode_is_written_under_the_cache_and_read_from_it(tmp_path):
    package = _stand_in_torch(tmp_path)
    first, _ = _run(tmp_path)
    cache = tmp_path / "cache" / "pycache"
    assert first["path"] == first["prefix"] == first["env_prefix"] == str(cache)
    assert first["env_no_write"] is None, "the processes it starts must write there too"
    assert first["child"] == [str(cache), "0"]
    # the bytecode mirrors the sources under the cache; nothing is written beside them
    tag = sys.implementation.cache_tag
    pycs = {name: cache / package.relative_to(package.anchor) / f"{name}.{tag}.pyc"
            for name in ("__init__", "ops_table")}
    assert all(p.is_file() for p in pycs.values()), sorted(str(p) for p in cache.rglob("*.pyc"))[:5]
    assert not (package / "__pycache__").exists()
    # the next start reads it (python -v names the code object's file)
    second, trace = _run(tmp_path, "-v")
    assert second["value"] == first["value"] and second["table"] == first["table"]
    for pyc in pycs.values():
        assert f"code object from '{pyc}'" in trace
    # an edited source is compiled again, never served stale from the cache
    new_value = first["value"] + 1 + random.randrange(10**6)
    (package / "__init__.py").write_text(f"VALUE = {new_value}  # edited\n")
    third, _ = _run(tmp_path)
    assert third["value"] == new_value


def test_an_installation_with_bytecode_or_a_users_prefix_is_left_alone(tmp_path):
    package = _stand_in_torch(tmp_path)
    # bytecode beside the sources (a normal pip install): nothing changes
    assert compileall.compile_dir(str(package), quiet=1)
    result, _ = _run(tmp_path)
    assert result["path"] is None and result["prefix"] is None and result["env_prefix"] is None
    assert result["env_no_write"] == "1" and result["child"] == ["None", "1"]
    # no bytecode, but Python may write it beside the sources: nothing changes either
    for pyc in package.glob("__pycache__/*"):
        pyc.unlink()
    result, _ = _run(tmp_path, PYTHONDONTWRITEBYTECODE="")
    assert result["path"] is None and result["prefix"] is None
    for pyc in package.glob("__pycache__/*"):
        pyc.unlink()
    # no bytecode anywhere, but off, or the user's own prefix
    result, _ = _run(tmp_path, QUICKMOE_BYTECODE_CACHE="off")
    assert result["path"] is None and result["prefix"] is None and result["child"] == ["None", "1"]
    own = str(tmp_path / "mine")
    result, _ = _run(tmp_path, PYTHONPYCACHEPREFIX=own)
    assert result["path"] is None and result["prefix"] == result["env_prefix"] == own
    assert not (tmp_path / "cache" / "pycache").exists()


def test_a_bad_mode_is_an_error_naming_the_variable(monkeypatch, capsys):
    value = random.choice(["on", "yes", "AUTO", "1"])
    monkeypatch.setenv("QUICKMOE_BYTECODE_CACHE", value)
    assert main(["generate", "--prompt", "Hello", "--max-tokens", "1", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert f"QUICKMOE_BYTECODE_CACHE = {value!r}" in err and "['auto', 'off']" in err


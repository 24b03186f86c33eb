"""The bytecode cache: compiled Python (.pyc) for torch, triton and the rest kept under the quickmoe cache when the
installation has none beside its sources.

Python reads a module's compiled bytecode from `__pycache__/` beside its source and, without it, compiles the
source at every import. Images built with PYTHONDONTWRITEBYTECODE=1 (a common Dockerfile line) or with the
bytecode stripped ship no .pyc, and the variable keeps any from being written later: then every process start
compiles torch's 2,000-odd modules again. On the H100 machine of docs/benchmarks.md, which is such an image,
`import torch` took 3.8-4.4 s that way and 2.0-2.5 s from compiled bytecode; the serving imports 6.1-7.7 s against
3.1-3.3 s; Dynamo and Inductor (for --compile) 14.7-15.5 s against 4.3-4.7 s.

`enable_bytecode_cache()` runs first in the `quickmoe` command, before anything heavy is imported. It points
Python's bytecode at `<quickmoe cache>/pycache` (sys.pycache_prefix: a mirror of the source tree, written there
instead of beside the sources, so PYTHONDONTWRITEBYTECODE's intent, no files in the source trees, still holds)
when torch's bytecode is missing beside its sources and would not be written there: the first
start writes it (about 70 MB; 1-2 s slower, once, than a start without the cache), every later one reads it. Python
checks each .pyc against its source's size and modification time, so an upgraded package is compiled again, not
served stale. The setting goes into the environment too, so the processes quickmoe starts (the engine process of
`serve`, tensor-parallel ranks, Inductor's compile workers, `bench`'s runs) use the same cache.

QUICKMOE_BYTECODE_CACHE: `auto` (default; as above), `off` (never; Python's own behaviour). A prefix the user set
(PYTHONPYCACHEPREFIX or -X pycache_prefix) is always left as it is. The better fix, where one controls the image,
is to ship the bytecode in it: `python -m compileall -q $(python -c "import sysconfig;
print(sysconfig.get_paths()['purelib'])")`; `auto` then finds it and does nothing.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from pathlib import Path

from quickmoe.errors import ConfigError
from quickmoe.paths import cache_dir

__all__ = ["BYTECODE_CACHE_MODES", "bytecode_present", "enable_bytecode_cache"]

logger = logging.getLogger(__name__)

BYTECODE_CACHE_ENV = "QUICKMOE_BYTECODE_CACHE"
BYTECODE_CACHE_MODES = ("auto", "off")
# the package whose bytecode decides: torch, most of the imports (a source checkout of quickmoe without bytecode
# costs a tenth of a second, and the cache then holds it too)
WATCHED_PACKAGE = "torch"


def bytecode_present(package: str) -> bool | None:
    """Whether Python will read `package`'s compiled bytecode without help: its `__init__`'s .pyc is beside the
    source, or Python may write it there (bytecode writing on, directory writable). None: not installed, or not
    from source (a zip, a frozen or a compiled-only module)."""
    spec = importlib.util.find_spec(package)
    origin = spec.origin if spec is not None else None
    if origin is None or not origin.endswith(".py") or not os.path.exists(origin):
        return None
    pycache = Path(origin).parent / "__pycache__"
    if Path(importlib.util.cache_from_source(origin)).exists():
        return True
    writable = os.access(pycache if pycache.exists() else pycache.parent, os.W_OK)
    return writable and not sys.dont_write_bytecode


def enable_bytecode_cache(mode: str | None = None) -> Path | None:
    """Point this process's and its children's bytecode at `<quickmoe cache>/pycache` when the installation would
    otherwise compile sources at every start (see the module docstring). Returns the directory, or None where
    nothing changed. `mode` defaults to $QUICKMOE_BYTECODE_CACHE, else `auto`."""
    mode = mode if mode is not None else os.environ.get(BYTECODE_CACHE_ENV, "auto")
    if mode not in BYTECODE_CACHE_MODES:
        raise ConfigError(f"{BYTECODE_CACHE_ENV} = {mode!r}: expected one of {list(BYTECODE_CACHE_MODES)}")
    if mode == "off" or sys.pycache_prefix is not None:
        return None
    if bytecode_present(WATCHED_PACKAGE) is not False:
        return None
    try:
        path = cache_dir() / "pycache"
        path.mkdir(exist_ok=True)
    except OSError as exc:
        logger.debug("bytecode cache not used: %s", exc)
        return None
    if not os.access(path, os.W_OK):
        logger.debug("bytecode cache not used: %s is not writable", path)
        return None
    # importlib reads sys.pycache_prefix at every import; the environment carries it to the processes we start
    sys.pycache_prefix = str(path)
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = str(path)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    logger.debug("bytecode cache: %s (no bytecode beside %s's sources; %s=off turns it off)", path,
                 WATCHED_PACKAGE, BYTECODE_CACHE_ENV)
    return path

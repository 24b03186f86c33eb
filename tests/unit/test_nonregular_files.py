"""A checkpoint file that is not a regular file (a FIFO here: opening or reading it blocks until a writer comes)
never hangs quickmoe: the page-cache prefetch skips it with a warning, the reader refuses it with a
CheckpointError naming the file, and `quickmoe generate` / `quickmoe info` exit with that one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from quickmoe.checkpoint.default_model import ensure_default_model
from quickmoe.checkpoint.prefetch import PageCachePrefetch
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.config import ModelConfig
from quickmoe.errors import CheckpointError, ConfigError

TIMEOUT_S = 60


@pytest.fixture()
def fifo_checkpoint(tmp_path) -> Path:
    """The embedded model's files, its single shard replaced by a FIFO nobody writes to."""
    src = ensure_default_model()
    out = tmp_path / "model"
    out.mkdir()
    for f in src.iterdir():
        if f.suffix != ".safetensors":
            shutil.copy(f, out / f.name)
    for shard in src.glob("*.safetensors"):
        os.mkfifo(out / shard.name)
    return out


def _within(seconds: float, fn):
    """fn()'s result or exception; fails the test (instead of hanging it) when fn blocks longer than `seconds`."""
    box: dict = {}

    def call() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # handed to the test thread
            box["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for more than {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["result"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "quickmoe", *args], capture_output=True, text=True, timeout=TIMEOUT_S)


def test_the_prefetch_skips_a_fifo_without_blocking(fifo_checkpoint, caplog):
    fifo = next(fifo_checkpoint.glob("*.safetensors"))
    t0 = time.monotonic()
    prefetch = _within(10, PageCachePrefetch([fifo]).start)
    assert prefetch.join(timeout=10)
    assert time.monotonic() - t0 < 10 and prefetch.stats().failed_files == 1
    assert str(fifo) in caplog.text and "not a regular file" in caplog.text


def test_the_reader_refuses_a_fifo_naming_it(fifo_checkpoint):
    fifo = next(fifo_checkpoint.glob("*.safetensors"))
    with pytest.raises(CheckpointError, match=f"{fifo}.*not a regular file"):
        _within(10, lambda: CheckpointReader(fifo_checkpoint))


def test_a_fifo_config_json_is_refused(fifo_checkpoint):
    cfg = fifo_checkpoint / "config.json"
    cfg.unlink()
    os.mkfifo(cfg)
    with pytest.raises(ConfigError, match=f"{cfg}.*not a regular file"):
        _within(10, lambda: ModelConfig.from_dir(fifo_checkpoint))


@pytest.mark.parametrize("command", ["generate", "info"])
def test_cli_on_a_fifo_shard_exits_with_one_line(fifo_checkpoint, command):
    extra = ["--prompt", "hi", "--max-tokens", "1", "--device", "cpu"] if command == "generate" else []
    result = _run(command, str(fifo_checkpoint), *extra)
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not a regular file" in errors[0] and "Traceback" not in result.stderr

"""The directory a written checkpoint goes to (`synth.write_checkpoint`): checked before anything is written, and
installed at the end by renaming the finished temporary directory over it, so an interrupted run leaves no half
checkpoint behind and only an empty directory or an old checkpoint is ever replaced."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from quickmoe.errors import ConfigError

__all__ = ["CHECKPOINT_MARKERS", "check_output_dir", "directory_mode", "install_output_dir"]

CHECKPOINT_MARKERS = ("config.json", "model.safetensors.index.json")  # what makes a directory look like a checkpoint


def check_output_dir(out: Path, overwrite: bool) -> None:
    """Raise ConfigError unless `out` is absent, an empty directory, or (with `overwrite`) a checkpoint."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ConfigError(f"output {out} exists and is not a directory")
    if not any(out.iterdir()):
        return
    if not overwrite:
        raise ConfigError(f"output directory {out} exists and is not empty (pass overwrite=True, or "
                          f"--overwrite, to replace it)")
    if not any((out / marker).is_file() for marker in CHECKPOINT_MARKERS):
        raise ConfigError(f"output directory {out} is not empty and does not look like a checkpoint (no "
                          f"{' or '.join(CHECKPOINT_MARKERS)}): refusing to replace it")


def install_output_dir(tmp: Path, out: Path) -> None:
    """Move the finished directory `tmp` to `out`, replacing an empty or (checked) old checkpoint there."""
    old = None
    if out.exists() and any(out.iterdir()):
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.rename(out, old)
    try:
        os.rename(tmp, out)  # replaces an empty directory atomically
    except OSError as exc:
        if old is not None:
            os.rename(old, out)
            old = None
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):  # another writer finished first
            raise FileExistsError(f"{out} was written by someone else meanwhile") from None
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def directory_mode() -> int:
    """The mode a new directory gets under the process's umask (mkdtemp's are private; a checkpoint is not)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o777 & ~mask

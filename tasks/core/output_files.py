"""Writing a file the user named (`--output`, `--plot`): checked before the work, written whole.

A search or a simulation may run for hours before it writes: where its results go is checked
first (`unwritable`). The write itself goes to a temporary file beside the target and is then
renamed over it, so a full disk or a size limit leaves the user's previous file as it was, and
never half a file; the failure is one line naming the option, not a traceback.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from kube_elevator.tasks.core.errors import InputError

# What matplotlib's Agg backend writes, by file extension.
PLOT_FORMATS = frozenset({"png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif",
                          "tiff", "webp", "raw", "rgba", "pgf"})


def unwritable(path: Path, option: str) -> str:
    """Why a file cannot be written at `path` ("" when it can)."""
    if path.is_dir():
        return f"{option}: {path} is a directory; give a file name"
    if path.exists() and not stat.S_ISREG(path.stat().st_mode):
        # /dev/full, a FIFO: renaming over it would replace the device, writing into it fails
        return f"{option}: {path} is not a regular file; give a file name"
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        return f"{option}: {path}: the folder {folder} does not exist"
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"{option}: {path}: not writable"
    return ""


def unplottable(path: Path, option: str) -> str:
    """Why a plot cannot be written at `path`: `unwritable`, or an extension that names no
    image format (matplotlib would refuse it after the work, or add `.png` to a bare name)."""
    if problem := unwritable(path, option):
        return problem
    if path.suffix.lower().lstrip(".") not in PLOT_FORMATS:
        return (f"{option}: {path}: give a file name ending .png, .svg or .pdf "
                f"(one of {', '.join(sorted(PLOT_FORMATS))})")
    return ""


def write_atomically(path: Path, data: bytes, option: str) -> Path:
    """`data` at `path`, whole or not at all: written beside it, then renamed over it."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    created = False
    try:
        # 0o666 less the umask, as `open()` gives a new file (mkstemp's 0o600 would not)
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        created = True
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        if path.exists():  # a file replaced keeps its permissions
            os.chmod(temporary, stat.S_IMODE(path.stat().st_mode))
        os.replace(temporary, path)
    except OSError as error:
        if created:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise InputError([f"{option}: {path}: cannot write: {error.strerror or error}"]) \
            from None
    return path


__all__ = ["PLOT_FORMATS", "unplottable", "unwritable", "write_atomically"]

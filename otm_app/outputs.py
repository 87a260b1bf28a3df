"""Output folders of the commands: made before any work starts, refused in one line."""
from __future__ import annotations

import os
from pathlib import Path

from otm.errors import InputFileError


def output_folder(path: str | os.PathLike, option: str = "--out") -> Path:
    """``path`` as a folder that exists and can be written, made if missing.

    Raises :class:`otm.errors.InputFileError` naming ``option`` when it cannot be made (a
    file in the way, a read-only place) or written, so a command fails before it computes
    anything rather than after."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputFileError(f"{option} {str(path)!r}: cannot make this folder ({exc.strerror or exc})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputFileError(f"{option} {str(path)!r}: this folder cannot be written")
    return folder


__all__ = ["output_folder"]

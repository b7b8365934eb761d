"""The one way the toolkit writes a file: checked before any work, never onto an input, atomic.

`check_output_path` validates an output path before a command acts (the parent is an existing,
writable folder; the target is not a folder nor a special file), `refuse_same` refuses an output
that is one of the command's inputs (the same file by inode, by resolved path, or the SQLite
database behind a `sqlite://` URL together with its -wal/-shm/-journal companions), and
`write_bytes`/`write_text`/`replacing` write to an exclusive new temporary file in the target's
folder (created with O_CREAT|O_EXCL|O_NOFOLLOW under a random name, so a planted file or
symlink at a temporary name is never opened), fsync it, and `os.replace` it into place. A
symlink at the target itself is replaced, never written through. New files get mode 0o600
(owner read/write), narrowed further by the process umask.

Standard library only: it is in the bottom layer (tests/test_boundaries.py).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlsplit

FILE_MODE = 0o600
"""Mode of every file the toolkit creates, before the umask narrows it."""
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")
"""Files SQLite keeps next to a database; writing over one corrupts the database too."""
PathLike = str | os.PathLike[str]


class OutputPathError(ValueError):
    """An output path the toolkit refuses to write; the message names the path and the reason."""


def shown(path: PathLike) -> str:
    """The path as a message may print it: control and other unprintable characters escaped."""
    text = os.fspath(path)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def check_output_path(path: PathLike) -> Path:
    """Refuse, before any work, an output whose folder is missing, not a folder or not writable,
    or whose target is a folder or a special file; return the path."""
    target = Path(path)
    if not os.fspath(target) or target.name in ("", ".", ".."):
        raise OutputPathError(f"output {shown(target)!r} names no file")
    if "\x00" in os.fspath(target):
        raise OutputPathError(f"output {shown(target)!r} holds a NUL character")
    parent = target.parent
    try:
        folder = parent.stat()
    except FileNotFoundError:
        raise OutputPathError(
            f"output {shown(target)}: folder {shown(parent)} does not exist"
        ) from None
    except OSError as error:  # a name too long, a loop of symlinks, a file on the way
        reason = error.strerror or type(error).__name__
        raise OutputPathError(f"output {shown(target)}: {reason}") from None
    if not stat.S_ISDIR(folder.st_mode):
        raise OutputPathError(f"output {shown(target)}: {shown(parent)} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"output {shown(target)}: folder {shown(parent)} is not writable")
    _check_target(target)
    return target


def _check_target(target: Path) -> None:
    try:
        status = target.lstat()
    except FileNotFoundError:
        return
    except (OSError, ValueError) as error:  # a name too long, a NUL byte
        reason = getattr(error, "strerror", None) or str(error)
        raise OutputPathError(f"output {shown(target)}: {reason}") from None
    if stat.S_ISLNK(status.st_mode):
        if target.is_dir():
            raise OutputPathError(f"output {shown(target)} is a link to a folder")
        return
    if stat.S_ISDIR(status.st_mode):
        raise OutputPathError(f"output {shown(target)} is a folder")
    if not stat.S_ISREG(status.st_mode):
        raise OutputPathError(f"output {shown(target)} is not a regular file")
    if not os.access(target, os.W_OK):
        raise OutputPathError(f"output {shown(target)} is read-only")


def sqlite_file(url: str) -> Path | None:
    """The database file a `sqlite://` URL names (None for other URLs and in-memory SQLite)."""
    parts = urlsplit(url)
    if not parts.scheme.lower().startswith("sqlite"):
        return None
    database = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
    if database.startswith("file:"):
        database = database[len("file:") :]
    if database in ("", ":memory:"):
        return None
    return Path(database)


def _input_files(item: PathLike) -> list[Path]:
    text = os.fspath(item)
    if "://" not in text:
        return [Path(text)]
    database = sqlite_file(text)
    if database is None:
        return []
    return [database, *(database.with_name(database.name + s) for s in SQLITE_COMPANIONS)]


def _same(output: Path, candidate: Path) -> bool:
    with contextlib.suppress(OSError, ValueError):  # ValueError: a NUL in a path
        if os.path.samefile(output, candidate):
            return True
    try:
        return output.resolve(strict=False) == candidate.resolve(strict=False)
    except (OSError, ValueError, RuntimeError):  # RuntimeError: a symlink loop (3.11)
        return output.absolute() == candidate.absolute()


def refuse_same(output: PathLike, *inputs: PathLike | None) -> None:
    """Refuse an output that is one of the inputs: the same file (a hard link or a symlink to
    it too), the same resolved path, or the SQLite database (or companion) behind a sqlite URL.
    Inputs that are None or a non-SQLite URL are skipped."""
    target = Path(output)
    for item in inputs:
        if item is None:
            continue
        for candidate in _input_files(item):
            if _same(target, candidate):
                raise OutputPathError(
                    f"output {shown(target)} is also an input ({shown(candidate)}); "
                    "write to another file"
                )


def _temporary_name(target: Path) -> Path:
    return target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")


def _open_exclusive(path: Path, mode: int) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, mode)


def _sync_folder(folder: Path) -> None:
    if not hasattr(os, "O_DIRECTORY"):
        return
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def replacing(path: PathLike, *, mode: int = FILE_MODE) -> Iterator[BinaryIO]:
    """A binary file to write the target's new bytes to; on a clean exit it is fsynced and
    replaces the target, on an exception it is removed and the target is left as it was."""
    target = Path(path)
    temporary = _temporary_name(target)
    stream = os.fdopen(_open_exclusive(temporary, mode), "wb")
    try:
        with stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    _sync_folder(target.parent)


def write_bytes(path: PathLike, data: bytes, *, mode: int = FILE_MODE) -> None:
    """Atomically make `path` hold exactly `data` (see `replacing`)."""
    with replacing(path, mode=mode) as stream:
        stream.write(data)


def write_text(
    path: PathLike, text: str, *, encoding: str = "utf-8", mode: int = FILE_MODE
) -> None:
    """Atomically make `path` hold `text` in `encoding` (see `replacing`)."""
    write_bytes(path, text.encode(encoding), mode=mode)

"""The one way the toolkit writes a file: checked before any work, never onto an input, atomic,
never through a link.

`check_output_path` validates an output path before a command acts (the parent is an existing,
writable folder reached through real folders; the target is not a folder nor a special file),
`refuse_same` refuses an output that is one of the command's inputs (the same file by inode, by
resolved path, or the SQLite database behind a `sqlite://` URL together with its
-wal/-shm/-journal companions), and `write_bytes`/`write_text`/`replacing` write to an exclusive
new temporary file in the target's folder (created with O_CREAT|O_EXCL|O_NOFOLLOW under a random
name, so a planted file or symlink at a temporary name is never opened), fsync it, and
`os.replace` it into place. A symlink at the target itself is replaced, never written through.
`create` (a file read while it grows), `append_text` (a file another program reads back),
`make_folders` and `remove` are the other ways a file or folder is touched, under the same rules.

The folder a file goes into is opened one component at a time from a base, each with
O_NOFOLLOW relative to the one before (`openat`), and every operation is made relative to that
open folder: no folder between the base and the file can be a symbolic link, and none can be
swapped for one between the check and the write. The base is the one the caller names (the CI
step's workspace, the folder `policy export` was given), else the working directory when the
path lies inside it (a checkout can commit a link; a path the user names elsewhere is taken as
named). New files get mode 0o600 and new folders 0o700, narrowed further by the process umask.

Standard library only: it is in the bottom layer (tests/test_boundaries.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlsplit

FILE_MODE = 0o600
"""Mode of every file the toolkit creates, before the umask narrows it."""
FOLDER_MODE = 0o700
"""Mode of every folder the toolkit creates, before the umask narrows it."""
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


def check_output_path(path: PathLike, *, base: PathLike | None = None) -> Path:
    """Refuse, before any work, an output whose folder is missing, not a folder, not writable or
    reached through a link (see the module's note on the base), or whose target is a folder or a
    special file; return the path."""
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
    try:
        with _folder(parent, base):
            pass
    except OSError as error:
        raise OutputPathError(f"output {shown(target)}: {error.strerror or error}") from None
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


def _temporary_name(name: str) -> str:
    return f".{name}.{secrets.token_hex(8)}.tmp"


_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_AT_SUPPORTED = all(f in os.supports_dir_fd for f in (os.open, os.rename, os.unlink, os.mkdir))
"""`os.replace` takes the same descriptors as `os.rename` (both are renameat) but is not listed
in `os.supports_dir_fd` (https://docs.python.org/3/library/os.html#os.replace)."""


@dataclass
class _Folder:
    """A folder reached without following a link: its descriptor where the system has `openat`,
    else its path (checked component by component with lstat)."""

    path: Path
    fd: int | None

    def name(self, name: str) -> str:
        return name if self.fd is not None else os.fspath(self.path / name)

    def at(self) -> dict[str, int]:
        return {} if self.fd is None else {"dir_fd": self.fd}


def _base_and_parts(folder: Path, base: PathLike | None) -> tuple[Path, tuple[str, ...]]:
    """The base a folder is reached from and the components below it, lexically (so `..` cannot
    climb out of a link it never followed). Without a base: the working directory when the
    folder is inside it, else the deepest existing folder of the path as the user named it."""
    absolute = Path(os.path.abspath(folder))
    if base is not None:
        root = Path(os.path.abspath(base))
    else:
        here = Path(os.path.abspath(os.curdir))
        root = here if absolute == here or here in absolute.parents else absolute
        while root != here and not root.is_dir() and root != root.parent:
            root = root.parent
    try:
        return root, absolute.relative_to(root).parts
    except ValueError:
        raise OSError(errno.EXDEV, f"{shown(folder)} is outside {shown(root)}") from None


def _refused(error: OSError, path: Path) -> OSError:
    """A component that is not a real folder, said as such (the error's own words otherwise)."""
    with contextlib.suppress(OSError):
        status = path.lstat()
        if stat.S_ISLNK(status.st_mode):
            reason = (
                f"{shown(path)} is a symbolic link; files are written through real folders only"
            )
            return OSError(errno.ELOOP, reason)
        if not stat.S_ISDIR(status.st_mode):
            return OSError(errno.ENOTDIR, f"{shown(path)} is not a folder")
    return error


@contextlib.contextmanager
def _folder(
    folder: PathLike, base: PathLike | None = None, *, create: bool = False
) -> Iterator[_Folder]:
    """The folder, opened from its base one component at a time without following a link;
    missing components made (0o700) when `create`."""
    root, parts = _base_and_parts(Path(folder), base)
    if not _AT_SUPPORTED:
        yield _walk_by_path(root, parts, create)
        return
    descriptor = os.open(root, _FOLDER_FLAGS)
    current = root
    try:
        for part in parts:
            current = current / part
            try:
                following = os.open(part, _FOLDER_FLAGS | _NOFOLLOW, dir_fd=descriptor)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, FOLDER_MODE, dir_fd=descriptor)
                following = os.open(part, _FOLDER_FLAGS | _NOFOLLOW, dir_fd=descriptor)
            except OSError as error:
                raise _refused(error, current) from None
            os.close(descriptor)
            descriptor = following
        yield _Folder(current, descriptor)
    finally:
        os.close(descriptor)


def _walk_by_path(root: Path, parts: tuple[str, ...], create: bool) -> _Folder:
    current = root
    for part in parts:
        current = current / part
        if create and not os.path.lexists(current):
            with contextlib.suppress(FileExistsError):
                current.mkdir(mode=FOLDER_MODE)
        status = current.lstat()
        if not stat.S_ISDIR(status.st_mode):
            raise _refused(OSError(errno.ENOTDIR, shown(current)), current)
    return _Folder(current, None)


def _open_exclusive(path: PathLike, mode: int, dir_fd: int | None = None) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, mode, dir_fd=dir_fd)


def _sync_folder(folder: _Folder) -> None:
    if folder.fd is not None:
        with contextlib.suppress(OSError):
            os.fsync(folder.fd)
        return
    if not hasattr(os, "O_DIRECTORY"):
        return
    descriptor = os.open(folder.path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def replacing(
    path: PathLike, *, mode: int = FILE_MODE, base: PathLike | None = None
) -> Iterator[BinaryIO]:
    """A binary file to write the target's new bytes to; on a clean exit it is fsynced and
    replaces the target, on an exception it is removed and the target is left as it was."""
    target = Path(path)
    with _folder(target.parent, base) as folder:
        temporary = _temporary_name(target.name)
        stream = os.fdopen(_open_exclusive(folder.name(temporary), mode, folder.fd), "wb")
        try:
            with stream:
                yield stream
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(
                folder.name(temporary),
                folder.name(target.name),
                src_dir_fd=folder.fd,
                dst_dir_fd=folder.fd,
            )
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder.name(temporary), **folder.at())
            raise
        _sync_folder(folder)


def write_bytes(
    path: PathLike, data: bytes, *, mode: int = FILE_MODE, base: PathLike | None = None
) -> None:
    """Atomically make `path` hold exactly `data` (see `replacing`)."""
    with replacing(path, mode=mode, base=base) as stream:
        stream.write(data)


def write_text(
    path: PathLike,
    text: str,
    *,
    encoding: str = "utf-8",
    mode: int = FILE_MODE,
    base: PathLike | None = None,
) -> None:
    """Atomically make `path` hold `text` in `encoding` (see `replacing`)."""
    write_bytes(path, text.encode(encoding), mode=mode, base=base)


def create(path: PathLike, *, base: PathLike | None = None) -> BinaryIO:
    """A new, empty file at `path` to write in place, for a file read while it grows (`audit
    --stream`, a log): whatever held the name (a file, a link) is removed first, never written
    through, and the file is created exclusively."""
    target = Path(path)
    with _folder(target.parent, base) as folder:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder.name(target.name), **folder.at())
        return os.fdopen(_open_exclusive(folder.name(target.name), FILE_MODE, folder.fd), "wb")


def append_text(path: PathLike, text: str, *, base: PathLike | None = None) -> None:
    """`text` added at the end of `path` (created if missing), for a file another program reads
    back (the GitHub runner's output and summary files); a link at the name is refused."""
    target = Path(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    with _folder(target.parent, base) as folder:
        try:
            descriptor = os.open(folder.name(target.name), flags, FILE_MODE, **folder.at())
        except OSError as error:
            raise _refused(error, target) from None
    with os.fdopen(descriptor, "ab") as stream:
        stream.write(text.encode("utf-8"))


def make_folders(path: PathLike, *, base: PathLike | None = None) -> Path:
    """The folder `path`, its missing components made (0o700), none of them a link."""
    with _folder(path, base, create=True):
        return Path(path)


def remove(path: PathLike, *, base: PathLike | None = None) -> None:
    """The file `path` removed if it is there (a link is removed, never followed)."""
    target = Path(path)
    with _folder(target.parent, base) as folder, contextlib.suppress(FileNotFoundError):
        os.unlink(folder.name(target.name), **folder.at())

"""Where gagpo keeps what it builds once: catalogs, search indexes, models, game sets, and
the served shop's token secret."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path


def cache_dir() -> Path:
    """``$GAGPO_CACHE`` if set, else ``$XDG_CACHE_HOME/gagpo`` or ``~/.cache/gagpo``."""
    root = os.environ.get("GAGPO_CACHE")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "gagpo"


def build_once(target: Path, build: Callable[[Path], None]) -> Path:
    """Return ``target``, building it first if absent.

    ``build`` writes into a fresh temporary folder beside ``target`` that is then renamed into
    place, so a crash never leaves a half-built cache and concurrent builders do not clash
    (the first rename wins; the others' work is dropped).
    """
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def private_file_once(path: Path, make: Callable[[], bytes]) -> bytes:
    """The bytes of ``path``, which only its owner may read; written first with ``make()``
    if absent.

    The file is written whole under a temporary name (created 0600) and then hard-linked into
    place, which fails if ``path`` exists: when several processes start at once, the first
    link wins and every process returns that one's bytes. An existing file that others can
    read or write, or that another user owns, is refused (:class:`PermissionError`).
    """
    try:
        return _read_private(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    data = make()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process was first: use its file
        except OSError:  # no hard links here: exclusive create, written in one call
            _create_exclusive(path, data)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return _read_private(path)


def _create_exclusive(path: Path, data: bytes) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _read_private(path: Path) -> bytes:
    # No following links and no blocking: someone who can write the folder may have put a
    # link or a named pipe there (opening a pipe would wait for a writer forever).
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise PermissionError(f"{path} is a symbolic link: delete it to have a file made") from e
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # checked before fdopen, which refuses folders itself
        os.close(fd)
        raise PermissionError(f"{path} is not a regular file: delete it to have one made")
    with os.fdopen(fd, "rb") as f:
        if os.name == "posix" and (st.st_mode & 0o077 or st.st_uid != os.getuid()):
            raise PermissionError(
                f"{path} must belong to you and be readable by you only (chmod 600 {path}), "
                "or delete it to have a new one made"
            )
        return f.read()

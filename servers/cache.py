"""Where gagpo keeps what it builds once: catalogs, search indexes, models, game sets."""

from __future__ import annotations

import os
import shutil
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

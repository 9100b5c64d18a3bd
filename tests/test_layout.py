"""docs/layout.md matches the tree: every folder of the repository, every module of the
trainer's package and every integration is named there, and every path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = (ROOT / "docs" / "layout.md").read_text()
NAMED = set(re.findall(r"`([\w./-]+)`", LAYOUT))


def named(path: str) -> bool:
    """Whether layout.md names ``path`` (as itself, or as a file beside others in a row)."""
    if path in NAMED:
        return True
    folder, _, name = path.rpartition("/")
    return name in NAMED and any(n.startswith(folder + "/") for n in NAMED)


IGNORED = {line.strip().strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
           if line.strip().endswith("/") and "*" not in line}
"""Top-level folders git ignores (``runs/`` after ``make demo``, ``mutants/`` after ``make
mutate``): made by a run, not part of the tree the page describes."""


def test_every_folder_and_trainer_module_is_on_the_layout_page():
    folders = sorted(p.name + "/" for p in ROOT.iterdir() if p.is_dir()
                     and not p.name.startswith(".") and not p.name.endswith(".egg-info")
                     and p.name not in IGNORED)
    modules = sorted(f"gagpo/{p.name}" for p in (ROOT / "gagpo").glob("*.py")
                     if p.name != "__init__.py")
    integrations = sorted(f"{p.name}/" if p.is_dir() else p.name
                          for p in (ROOT / "gagpo" / "integrations").iterdir()
                          if p.name not in ("__init__.py", "__pycache__"))
    missing = [f for f in folders if not named(f)] + [m for m in modules if not named(m)] + \
        [i for i in integrations if i not in NAMED]
    assert not missing, f"docs/layout.md does not name {missing}"


def test_every_path_the_layout_page_names_exists():
    top = {p.name for p in ROOT.iterdir() if p.is_dir()}
    paths = [n for n in NAMED if "/" in n and n.split("/")[0] in top and "<" not in n]
    gone = [n for n in paths if not (ROOT / n).exists()]
    assert not gone, f"docs/layout.md names paths that do not exist: {gone}"

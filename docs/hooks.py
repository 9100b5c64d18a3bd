"""MkDocs hooks of the documentation site (``mkdocs.yml`` names this file; it is not a page).

The pages link to the recorded results under ``benchmarks/results/``, to the frozen studies
under ``studies/`` (their READMEs and records, not their scripts) and to
``envs/alfworld/README.md``, outside ``docs/``, with the relative links that work on GitHub
(``../benchmarks/results/demo/README.md``). MkDocs only knows the files of ``docs/``, so such a
link would be "not found" (an error under ``--strict``) and dead on the site. These hooks add
those files to the site under their own paths, as MkDocs files whose source is ``../<path>``:
MkDocs then checks every link to them as it checks links between pages (a link to a result
that is not there fails the strict build), renders their Markdown as pages and copies the rest
(reports, figures). The few links of those files back into ``docs/`` are rewritten to the
pages' addresses, and checked here.

The API reference (mkdocstrings, which reads the sources with griffe) needs one more thing:
``gagpo.envs``, ``gagpo.agents``, ``gagpo.servers`` and ``gagpo.common`` live in the folders
``envs/``, ``agents/``, ``servers/`` and ``common/`` (``[tool.setuptools.package-dir]`` of
``pyproject.toml``), not under ``gagpo/``, where griffe looks for a package's submodules. The
hook hands griffe those folders as ``gagpo``'s submodules, so the reference is read from the
sources under the documented import paths.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

import griffe
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.utils import get_relative_url

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

log = logging.getLogger("mkdocs.hooks.repo_files")  # a warning here fails ``mkdocs build --strict``

#: What the pages may link to outside docs/, from the repository's root.
OUTSIDE = ("benchmarks/results", "studies", "envs/alfworld/README.md")
#: Never on the site: make bench's short runs (not committed), Python's caches.
SKIP = {"quick", "__pycache__"}
#: Nor the studies' scripts: the site serves their READMEs and records.
SKIP_SUFFIXES = {".py", ".pyc"}

LINK = re.compile(r"(\]\()([^)\s#]+)((?:#[^)\s]*)?\))")
ROOT = Path(__file__).resolve().parents[1]


def _layers() -> dict[str, Path]:
    """``gagpo``'s sub-packages kept in folders of their own: name -> folder."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        dirs = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return {name.split(".", 1)[1]: ROOT / folder for name, folder in dirs.items()
            if name.startswith("gagpo.") and name.count(".") == 1}


_griffe_submodules = griffe.ModuleFinder.submodules


def _submodules(self: griffe.ModuleFinder, module: griffe.Module) -> list:
    """griffe's submodules of ``module``, and for ``gagpo`` those of its layer folders."""
    found = list(_griffe_submodules(self, module))
    if module.path == "gagpo":
        for name, folder in _layers().items():
            found.append(((name,), folder / "__init__.py"))
            found += [((name, *parts), path)
                      for parts, path in self.iter_submodules(folder / "__init__.py")]
        found.sort(key=lambda item: len(item[0]))
    return found


griffe.ModuleFinder.submodules = _submodules


def _outside_files(root: Path) -> list[str]:
    """The repository's files under ``OUTSIDE``, as paths from the root."""
    found = []
    for top in OUTSIDE:
        base = root / top
        paths = sorted(base.rglob("*")) if base.is_dir() else [base]
        for path in paths:
            rel = path.relative_to(root)
            if path.is_file() and not SKIP.intersection(rel.parts) \
                    and path.suffix not in SKIP_SUFFIXES:
                found.append(rel.as_posix())
    return found


def on_files(files: Files, config: Any) -> Files:
    docs = Path(config["docs_dir"])
    root = docs.parent
    for rel in _outside_files(root):
        dest = File(rel, src_dir=str(root), dest_dir=config["site_dir"],
                    use_directory_urls=config["use_directory_urls"]).dest_uri
        files.append(File(f"../{rel}", src_dir=str(docs), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"], dest_uri=dest,
                          inclusion=InclusionLevel.NOT_IN_NAV))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """In a page from outside docs/, a link into docs/ (``../../../docs/algorithms.md``)
    becomes the address of that page, relative to this one's."""
    src = page.file.src_uri
    if not src.startswith("../"):
        return markdown

    def into_docs(m: re.Match) -> str:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(src), m.group(2)))
        if not target.startswith("../docs/"):
            return m.group(0)
        doc = files.get_file_from_path(target[len("../docs/"):])
        if doc is None:
            log.warning("%s links to %s, which is not a page of docs/", src[3:], m.group(2))
            return m.group(0)
        return m.group(1) + get_relative_url(doc.url, page.file.url) + m.group(3)

    return LINK.sub(into_docs, markdown)

"""The documentation site builds: ``mkdocs build --strict`` of mkdocs.yml into a temporary
folder, offline. Strict turns MkDocs' warnings into a failed build: a link to a page, a recorded
result (docs/hooks.py serves benchmarks/results/ and studies/) or an anchor that is not there, a
page of docs/ missing from the navigation, an API reference (``::: gagpo.x``) that does not
resolve or a docstring griffe cannot read."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 600


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site``, with this venv's MkDocs."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail("MkDocs is not installed: `make install` installs the `docs` extra")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about MkDocs 2
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT)


def test_the_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    done = build(ROOT / "mkdocs.yml", site)
    assert done.returncode == 0, done.stdout + done.stderr
    # Every page of docs/ is built, the API reference holds the objects it names, and the
    # recorded results the pages link to are served beside them.
    for page in sorted((ROOT / "docs").rglob("*.md")):
        stem = page.relative_to(ROOT / "docs").with_suffix("")
        built = site / ("index.html" if stem.name == "index" else stem / "index.html")
        assert built.is_file(), built
    api = (site / "api" / "envs" / "index.html").read_text()
    assert 'id="gagpo.envs.base.TextEnv"' in api and 'id="gagpo.envs.checker.check_env"' in api
    assert 'id="gagpo.compare"' in (site / "api" / "evaluation" / "index.html").read_text()
    assert (site / "benchmarks" / "results" / "index.html").is_file()  # the results index
    assert (site / "benchmarks" / "results" / "demo" / "report.txt").is_file()
    # The studies' READMEs and records too, not their scripts.
    assert (site / "studies" / "index.html").is_file()
    assert (site / "studies" / "real_model" / "results" / "fair_run" / "index.html").is_file()
    assert not list((site / "studies").rglob("*.py"))


def _site_of(tmp_path: Path, page: str) -> Path:
    """A site of one page, with the project's theme, plugins, hooks and checks."""
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    for key in ("nav", "watch"):
        config.pop(key, None)
    config["hooks"] = [str(ROOT / hook) for hook in config["hooks"]]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(page)
    config["docs_dir"] = str(docs)
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("page, named", [
    ("# A page\n\n[here](#a-page)\n\n::: gagpo.envs.checker\n", None),  # builds
    ("# A page\n\n[gone](../benchmarks/results/no_such_run/report.txt)\n", "no_such_run"),
    ("# A page\n\n[nowhere](#no-such-heading)\n", "no-such-heading"),
    ("# A page\n\n::: gagpo.no_such_module\n", "gagpo.no_such_module"),
])
def test_a_broken_link_anchor_or_reference_fails_the_build(tmp_path, page, named):
    done = build(_site_of(tmp_path, page), tmp_path / "site")
    output = done.stdout + done.stderr
    if named is None:
        assert done.returncode == 0, output
    else:
        assert done.returncode != 0 and named in output, output

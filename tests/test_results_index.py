"""benchmarks/results/README.md indexes every recorded result, and the docs cite only what is
there: a folder (or file) under benchmarks/results/ missing from the index fails, and so does a
link of the README or a docs page into benchmarks/results/ that points at nothing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
INDEX = RESULTS / "README.md"
#: Under benchmarks/results/ but never committed (.gitignore): `make bench`'s short runs.
NOT_RECORDED = {"quick"}
#: The pages whose links into benchmarks/results/ must resolve.
PAGES = [ROOT / "README.md", ROOT / "envs" / "alfworld" / "README.md",
         *sorted((ROOT / "docs").rglob("*.md"))]

LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
MENTION = re.compile(r"(?<![\w/.-])benchmarks/results/[\w./-]*\w")  # from the root, not in a URL


def links(text: str) -> list[str]:
    """The targets of the Markdown links in ``text`` that are paths (not URLs, not anchors
    alone), without their ``#anchor``."""
    out = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        out.append(target.split("#", 1)[0])
    return out


def entries(folder: Path) -> list[str]:
    """The names of a results folder's entries that the index must name."""
    return sorted(p.name for p in folder.iterdir()
                  if not p.name.startswith(".") and p.name not in NOT_RECORDED
                  and p.name != "README.md")


def unindexed(results: Path, index_text: str) -> list[str]:
    """Entries of ``results`` (and of its ``archive/``) that no link of the index reaches: a
    link to the entry itself or to anything inside it counts."""
    targets = [t.rstrip("/") for t in links(index_text)]

    def linked(rel: str) -> bool:
        return any(t == rel or t.startswith(rel + "/") for t in targets)

    missing = [name for name in entries(results) if not linked(name)]
    archive = results / "archive"
    if archive.is_dir():
        missing += [f"archive/{name}" for name in entries(archive)
                    if not linked(f"archive/{name}")]
    return missing


def broken_links(page: Path, results: Path, root: Path) -> list[str]:
    """Links of ``page`` into ``results`` that point at nothing, and paths
    ``benchmarks/results/...`` it names (from the repository's root) that do not exist."""
    text = page.read_text()
    broken = []
    for target in links(text):
        path = (page.parent / target).resolve()
        if path.is_relative_to(results.resolve()) and not path.exists():
            broken.append(target)
    broken += [m for m in MENTION.findall(text) if not (root / m).exists()]
    return broken


def test_every_results_folder_is_in_the_index():
    missing = unindexed(RESULTS, INDEX.read_text())
    assert not missing, f"not in benchmarks/results/README.md: {missing}"


def test_every_link_of_the_index_points_at_a_recorded_result():
    text = INDEX.read_text()
    broken = [t for t in links(text) if not (INDEX.parent / t).exists()]
    assert not broken, broken


def test_the_docs_cite_only_results_that_are_there():
    broken = {str(page.relative_to(ROOT)): b for page in PAGES
              if (b := broken_links(page, RESULTS, ROOT))}
    assert not broken, broken


def test_the_checks_catch_a_missing_entry_and_a_broken_link(tmp_path):
    results = tmp_path / "benchmarks" / "results"
    for folder in ("bench", "bench_variant", "archive/old", "quick"):
        (results / folder).mkdir(parents=True)
    (results / "loose.md").write_text("figures")
    index = "[`bench/`](bench/report.txt) [old](archive/old/) [loose](loose.md#top)"
    assert unindexed(results, index) == ["bench_variant"]
    assert unindexed(results, index + " [v](bench_variant)") == []

    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text("[a](../benchmarks/results/bench/) [b](../benchmarks/results/gone/report.txt)"
                    " [c](https://example.org/benchmarks/results/x) [d](#benchmarks)"
                    " `benchmarks/results/loose.md` `benchmarks/results/missing/`")
    assert broken_links(page, results, tmp_path) == [
        "../benchmarks/results/gone/report.txt", "benchmarks/results/missing"]

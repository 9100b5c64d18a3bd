"""Every recorded result is indexed, and the docs cite only what is there.

- ``benchmarks/results/README.md`` indexes the benchmarks' reports: a folder (or file) under
  ``benchmarks/results/``, or a variant's subfolder (``rollout_throughput/8x8_bf16/``), missing
  from it fails.
- Each frozen study, ``studies/<name>/``, has a README that indexes its records: an entry of
  its ``results/`` missing from it fails, and so does a study that the results index and
  ``studies/README.md`` do not list.
- A link of the README, of a docs page or of a study's README into ``benchmarks/results/`` or
  ``studies/`` that points at nothing fails, and so does a path ``benchmarks/results/...`` or
  ``studies/...`` that the README or a docs page names and that is not there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
INDEX = RESULTS / "README.md"
STUDIES = ROOT / "studies"
#: Under benchmarks/results/ but never committed (.gitignore): `make bench`'s short runs.
NOT_RECORDED = {"quick", "__pycache__"}
#: The pages whose links and named paths into the results must resolve.
PAGES = [ROOT / "README.md", ROOT / "envs" / "alfworld" / "README.md",
         *sorted((ROOT / "docs").rglob("*.md"))]

LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# From the root, not in a URL nor inside a longer path.
MENTION = re.compile(r"(?<![\w/.-])(?:benchmarks/results|studies)/[\w./-]*\w")


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
    """The names of a results folder's entries that an index must name."""
    return sorted(p.name for p in folder.iterdir()
                  if not p.name.startswith(".") and p.name not in NOT_RECORDED
                  and p.name != "README.md")


def _linked(index: Path, index_text: str):
    """Whether a path (from the root) is reached by a link of ``index``: a link to it or to
    anything inside it."""
    targets = [(index.parent / t).resolve() for t in links(index_text)]

    def linked(path: Path) -> bool:
        path = path.resolve()
        return any(t == path or t.is_relative_to(path) for t in targets)

    return linked


def unindexed(results: Path, index_text: str, variants: bool = True) -> list[str]:
    """Entries of ``results`` (and, with ``variants``, the subfolders of its folders: a
    benchmark's variants) that no link of the index reaches, the index being
    ``results/README.md`` unless it is elsewhere (a study's README indexes its
    ``results/``)."""
    index = results / "README.md"
    return unindexed_from(index, index_text, results, variants)


def unindexed_from(index: Path, index_text: str, results: Path, variants: bool) -> list[str]:
    linked = _linked(index, index_text)
    missing = []
    for name in entries(results):
        if not linked(results / name):
            missing.append(name)
        elif variants and (results / name).is_dir():
            missing += [f"{name}/{sub}" for sub in entries(results / name)
                        if (results / name / sub).is_dir() and not linked(results / name / sub)]
    return missing


def studies(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name not in NOT_RECORDED
                  and not p.name.startswith("."))


def study_problems(study: Path) -> list[str]:
    """What a study folder lacks: its README, or links of it to every entry of its
    ``results/``."""
    readme = study / "README.md"
    if not readme.exists():
        return [f"{study.name}: no README.md"]
    records = study / "results"
    if not records.is_dir():
        return []
    return [f"{study.name}/results/{name}"
            for name in unindexed_from(readme, readme.read_text(), records, variants=False)]


def broken_links(page: Path, results: Path, root: Path, mentions: bool = True,
                 studies_root: Path | None = None) -> list[str]:
    """Links of ``page`` into ``results`` (or ``studies_root``) that point at nothing, and,
    with ``mentions``, paths ``benchmarks/results/...`` or ``studies/...`` it names (from the
    repository's root) that do not exist."""
    text = page.read_text()
    inside = [results.resolve(), *([studies_root.resolve()] if studies_root else [])]
    broken = []
    for target in links(text):
        path = (page.parent / target).resolve()
        if any(path.is_relative_to(d) for d in inside) and not path.exists():
            broken.append(target)
    if mentions:
        broken += [m for m in MENTION.findall(text) if not (root / m).exists()]
    return broken


def test_every_results_folder_and_variant_is_in_the_index():
    missing = unindexed(RESULTS, INDEX.read_text())
    assert not missing, f"not in benchmarks/results/README.md: {missing}"


def test_every_link_of_the_index_points_at_a_recorded_result():
    text = INDEX.read_text()
    broken = [t for t in links(text) if not (INDEX.parent / t).exists()]
    assert not broken, broken


def test_every_study_indexes_its_records_and_is_listed():
    found = studies(STUDIES)
    assert {p.name for p in found} >= {"real_model", "cheaper_iteration"}
    problems = [p for study in found for p in study_problems(study)]
    assert not problems, problems
    for index in (INDEX, STUDIES / "README.md"):
        linked = _linked(index, index.read_text())
        unlisted = [s.name for s in found if not linked(s)]
        assert not unlisted, f"{index.relative_to(ROOT)} does not list {unlisted}"


def test_the_docs_and_the_studies_cite_only_results_that_are_there():
    broken = {str(page.relative_to(ROOT)): b for page in PAGES
              if (b := broken_links(page, RESULTS, ROOT, studies_root=STUDIES))}
    # A study's README and its records' READMEs: links only (their commands name the folders
    # of the runs as they were written).
    for page in sorted(STUDIES.rglob("*.md")):
        if b := broken_links(page, RESULTS, ROOT, mentions=False, studies_root=STUDIES):
            broken[str(page.relative_to(ROOT))] = b
    assert not broken, broken


def test_the_checks_catch_a_missing_entry_and_a_broken_link(tmp_path):
    results = tmp_path / "benchmarks" / "results"
    for folder in ("bench", "bench/variant", "bench_other", "quick"):
        (results / folder).mkdir(parents=True)
    (results / "loose.md").write_text("figures")
    index = "[`bench/`](bench/report.txt) [loose](loose.md#top)"
    assert unindexed(results, index) == ["bench/variant", "bench_other"]
    assert unindexed(results, index + " [v](bench/variant/) [o](bench_other)") == []

    study = tmp_path / "studies" / "one"
    (study / "results" / "run" / "deep").mkdir(parents=True)
    (study / "results" / "table.md").write_text("rows")
    assert study_problems(study) == ["one: no README.md"]
    (study / "README.md").write_text("[run](results/run/report.txt)")
    assert study_problems(study) == ["one/results/table.md"]  # no variants asked of a study
    (study / "README.md").write_text("[run](results/run/) [t](results/table.md)")
    assert study_problems(study) == []

    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text("[a](../benchmarks/results/bench/) [b](../benchmarks/results/gone/report.txt)"
                    " [c](https://example.org/benchmarks/results/x) [d](#benchmarks)"
                    " `benchmarks/results/loose.md` `benchmarks/results/missing/`"
                    " [e](../studies/one/README.md) [f](../studies/two/README.md)"
                    " `studies/one/results/run` `studies/one/gone.py`")
    assert broken_links(page, results, tmp_path, studies_root=tmp_path / "studies") == [
        "../benchmarks/results/gone/report.txt", "../studies/two/README.md",
        "benchmarks/results/missing", "studies/one/gone.py"]
    assert broken_links(page, results, tmp_path, mentions=False) == [
        "../benchmarks/results/gone/report.txt"]

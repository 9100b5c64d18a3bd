"""The README's Results table, the docs' tables and every figure quoted in prose (a span
``<!-- fig NAME -->VALUE<!-- /fig -->``) are made from the records' summaries
(benchmarks/figures.py): a figure quoted that differs from its summary fails here, and so does a
span naming no figure."""

from __future__ import annotations

import importlib
import json

import pytest

from benchmarks import figures
from benchmarks.record import recorded


@pytest.mark.parametrize("block", figures.BLOCKS, ids=lambda b: b.name)
def test_each_made_table_is_the_one_its_summaries_make(block):
    text = block.page.read_text()
    assert block.made(text) == text, \
        f"{block.page.name}'s {block.name} differs from its summaries: python -m benchmarks.figures"


def test_the_check_passes_on_the_committed_pages():
    assert figures.main(["--check"]) == 0


def test_a_figure_changed_in_its_summary_fails_the_check(monkeypatch, capsys):
    real = figures.load

    def tampered(path: str):
        data = real(path)
        if path.endswith("webshop_bench/summary.json"):
            data = data | {"step_median_ms": data["step_median_ms"] * 2}
        return data

    monkeypatch.setattr(figures, "load", tampered)
    assert figures.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "README.md's results" in err and "docs/benchmarks.md's webshop speed" in err


def test_the_table_keeps_to_ten_rows_of_short_cells():
    rows = figures.ROWS
    assert len(rows) <= figures.MAX_ROWS
    long = figures.Row("a " * 26, lambda: "1", (("x", "y"),))
    with pytest.raises(ValueError, match="a cell of 26 words"):
        figures.table((long,))
    with pytest.raises(ValueError, match="at most 10"):
        figures.table(rows[:1] * 11)


@pytest.mark.parametrize("folder", sorted(figures.reports()),
                         ids=lambda f: f.relative_to(figures.ROOT / figures.RESULTS).as_posix())
def test_each_summary_is_what_its_benchmark_reads_from_its_report(folder):
    """Every recorded report of a summarized benchmark, its variants' included, has the
    summary.json its benchmark's ``summarize`` reads from it (``--summaries`` rewrites them)."""
    module = importlib.import_module(figures.reports()[folder])
    committed = json.loads((folder / "summary.json").read_text())
    assert module.summarize((folder / "report.txt").read_text()) == committed


@pytest.mark.parametrize("module", sorted(set(figures.SUMMARIZED.values())))
def test_a_summary_refuses_a_report_of_another_kind(module):
    with pytest.raises(ValueError, match="not a"):
        importlib.import_module(module).summarize("something else\n")


def test_the_variants_have_summaries_of_their_own():
    found = {f.relative_to(figures.ROOT / figures.RESULTS).as_posix() for f in figures.reports()}
    assert {"update_memory/packed", "rollout_throughput/8x8_bf16", "vector_bench/alfworld",
            "trainer_overhead/demo"} <= found


PAGE = ("The engine is <!-- fig alfworld_bench.step_ratio -->{}<!-- /fig --> faster,\n"
        "with <!-- fig vector_bench.process_ratio -->{}<!-- /fig --> from 2 workers.\n")


def test_a_span_is_made_from_its_summary():
    ratio = f"{figures.summary('alfworld_bench')['step_ratio']:.0f}x"
    workers = f"{figures.summary('vector_bench')['backends']['process']['ratio']:.2f}x"
    right = PAGE.format(ratio, workers)
    assert figures.spans_made(right) == (right, [], [])
    made, differ, broken = figures.spans_made(PAGE.format("3x", workers))
    assert made == right and not broken
    assert differ == [f"alfworld_bench.step_ratio: '3x' here, '{ratio}' made"]


@pytest.mark.parametrize("text, problem", [
    ("as <!-- fig no.such_figure -->1x<!-- /fig --> was", "no.such_figure: no such figure"),
    ("as <!-- fig vector_bench.ray_ratio -->1x was", "vector_bench.ray_ratio: not closed"),
    ("as\n<!-- fig vector_bench.ray_ratio -->1x<!-- /fig --> was", "starts a line"),
    ("- <!-- fig vector_bench.ray_ratio -->1x<!-- /fig --> was", "starts a line"),
])
def test_a_span_that_cannot_be_made_is_broken(text, problem):
    _, _, broken = figures.spans_made(text)
    assert len(broken) == 1 and problem in broken[0]


def _one_page(monkeypatch, tmp_path, text):
    page = tmp_path / "page.md"
    page.write_text(text)
    monkeypatch.setattr(figures, "BLOCKS", ())
    monkeypatch.setattr(figures, "pages", lambda: [page])
    return page


def test_the_check_fails_on_a_wrong_figure_and_the_run_rewrites_it(monkeypatch, tmp_path,
                                                                   capsys):
    ratio = f"{figures.summary('alfworld_bench')['step_ratio']:.0f}x"
    workers = f"{figures.summary('vector_bench')['backends']['process']['ratio']:.2f}x"
    page = _one_page(monkeypatch, tmp_path, PAGE.format(ratio, "9.99x"))
    assert figures.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert f"{page}: figure vector_bench.process_ratio: '9.99x' here, '{workers}' made" in err
    assert page.read_text() == PAGE.format(ratio, "9.99x")  # the check writes nothing
    assert figures.main([]) == 0
    assert page.read_text() == PAGE.format(ratio, workers)
    assert figures.main(["--check"]) == 0


def test_the_check_and_the_run_fail_on_an_unknown_figure(monkeypatch, tmp_path, capsys):
    page = _one_page(monkeypatch, tmp_path, "as <!-- fig vector_bench.typo -->1x<!-- /fig -->\n")
    for argv in (["--check"], []):
        assert figures.main(argv) == 1
        assert f"{page}: figure vector_bench.typo: no such figure" in capsys.readouterr().err


def test_a_figure_changed_in_its_summary_fails_the_check_of_its_page(monkeypatch, capsys):
    real = figures.load

    def tampered(path: str):
        data = real(path)
        if path.endswith("vector_bench/summary.json"):
            data["backends"]["inprocess"]["steps_per_s"] *= 2
        return data

    monkeypatch.setattr(figures, "load", tampered)
    assert figures.main(["--check"]) == 1
    assert "docs/benchmarks.md: figure vector_bench.inprocess: " in capsys.readouterr().err


def test_every_page_with_spans_is_checked():
    checked = set(figures.pages())
    for page in (figures.README, figures.ROOT / "docs" / "benchmarks.md",
                 figures.ROOT / figures.RESULTS / "rollout_throughput" / "README.md"):
        assert page in checked and figures.SPAN.search(page.read_text())


def test_recorded_writes_the_summary_beside_the_report(tmp_path, capsys):
    with recorded(tmp_path, "python -m x", lambda text: {"lines": len(text.splitlines())}):
        print("one")
        print("two")
    assert (tmp_path / "report.txt").exists()
    assert json.loads((tmp_path / "summary.json").read_text()) == {"lines": 5}

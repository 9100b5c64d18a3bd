"""The README's Results table is made from the records' summaries (benchmarks/figures.py):
a figure quoted there that differs from its summary fails here."""

from __future__ import annotations

import json

import pytest

from benchmarks import alfworld_bench, figures, webshop_bench
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


@pytest.mark.parametrize("module", [webshop_bench, alfworld_bench])
def test_each_summary_is_what_its_benchmark_reads_from_its_report(module):
    folder = next(f for f, m in figures.SUMMARIZED.items() if m == module.__name__)
    report = (figures.ROOT / folder / "report.txt").read_text()
    committed = json.loads((figures.ROOT / folder / "summary.json").read_text())
    assert module.summarize(report) == committed
    with pytest.raises(ValueError, match="not a"):
        module.summarize("something else\n")


def test_recorded_writes_the_summary_beside_the_report(tmp_path, capsys):
    with recorded(tmp_path, "python -m x", lambda text: {"lines": len(text.splitlines())}):
        print("one")
        print("two")
    assert (tmp_path / "report.txt").exists()
    assert json.loads((tmp_path / "summary.json").read_text()) == {"lines": 5}

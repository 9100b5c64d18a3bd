"""The README's Results table and the docs' tables of figures, made from the reports'
machine-readable summaries (:data:`BLOCKS` lists them).

Every figure the table quotes is read from a JSON file written beside its report: a run's own
(``gagpo demo``'s ``evals.json``, ``gagpo eval``'s summaries, ``gagpo compare --out``), a
benchmark's (``credit_truth.json``, ``results.json``), or ``summary.json``, which
:func:`benchmarks.record.recorded` writes from a benchmark's printed report with the
benchmark's own ``summarize`` function. Nothing in the table is typed by hand::

    python -m benchmarks.figures            # rewrite the tables (README.md, docs/benchmarks.md)
    python -m benchmarks.figures --check    # exit 1 when a page's table is not the made one
    python -m benchmarks.figures --summaries  # rewrite the summary.json of recorded reports

``tests/test_figures.py`` runs the check: a quoted figure that differs from its summary fails.
A row is a :class:`Row`: what it measures, one figure made from its summaries, and the records
it links; at most :data:`MAX_ROWS` rows and :data:`MAX_WORDS` words a cell. A study's
narrative lives in its own README, not here.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_ROWS = 10
MAX_WORDS = 25

SUMMARIZED: dict[str, str] = {
    "benchmarks/results/webshop_bench": "benchmarks.webshop_bench",
    "benchmarks/results/alfworld_bench": "benchmarks.alfworld_bench",
}
"""Recorded reports whose ``summary.json`` their benchmark's ``summarize(report_text)`` makes."""


def load(path: str) -> Any:
    """A summary (JSON) by its path from the repository's root."""
    return json.loads((ROOT / path).read_text())


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def interval(ci: Sequence[float]) -> str:
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def signed(x: float, ci: Sequence[float]) -> str:
    return f"{x:+.1f} [{ci[0]:+.1f}, {ci[1]:+.1f}]"


@dataclass(frozen=True)
class Row:
    """One row of the table."""

    what: str
    figure: Callable[[], str]
    """The figure, made from the summaries each time the table is made."""
    links: tuple[tuple[str, str], ...]
    """``(label, path)`` of the records behind the figure."""

    def cells(self) -> tuple[str, str, str]:
        links = ", ".join(f"[{label}]({path})" for label, path in self.links)
        return self.what, self.figure(), links


def demo() -> str:
    d = load("benchmarks/results/demo/evals.json")
    before, after = d["before"]["all"], d["after"]["all"]
    return (f"success {pct(before['success'])} {interval(before['success_ci95'])} -> "
            f"{pct(after['success'])} {interval(after['success_ci95'])}")


def fair_comparison() -> str:
    score = load("studies/real_model/results/fair_run/gagpo_vs_grpo.json")["score"]
    x100 = [100 * v for v in score["t_ci95"]]
    return f"GAGPO - GRPO score x100 {signed(100 * score['diff'], x100)} per goal: level"


def alfworld_wins() -> str:
    base = "studies/real_model/results/alfworld_wins/evals/"
    before = load(base + "alfworld_wins_eval_warm_start.json")["by_type"]["all"]
    after = load(base + "alfworld_wins_eval_gagpo.json")["by_type"]["all"]
    return f"success {pct(before['success'])} -> {pct(after['success'])}: no gain shown"


def credit(measure: str, shapes: Sequence[str]) -> Callable[[], str]:
    def figure() -> str:
        d = load("benchmarks/results/credit_truth/credit_truth.json")
        held = d["held_out"]
        default = " / ".join(f"{held[s][d['chosen']][measure]:.2f}" for s in shapes)
        rival = " / ".join(f"{held[s]['gigpo mean'][measure]:.2f}" for s in shapes)
        return f"default GAGPO {default}, GiGPO (mean) {rival}"
    return figure


def webshop_step() -> str:
    d = load("benchmarks/results/webshop_bench/summary.json")
    return f"{d['step_median_ms']:.3f} ms ({d['speedup_vs_original']:.0f}x the original's ~15 ms)"


def alfworld_step() -> str:
    d = load("benchmarks/results/alfworld_bench/summary.json")
    return (f"{d['step_native_ms']:.3f} ms against {d['step_reference_ms']:.2f} ms "
            f"({d['step_ratio']:.0f}x)")


def served() -> str:
    runs = {r["env"]: r["load"] for r in load("benchmarks/results/openenv_serve/results.json")}
    errors = sum(r["errors"] for r in runs.values())
    return (f"WebShop-v0 {runs['WebShop-v0']['steps_per_s']:,.0f} steps/s, ALFWorld-v0 "
            f"{runs['ALFWorld-v0']['steps_per_s']:,.0f}, {errors} errors")


def verl_loop() -> str:
    envs = {e["env"]: e for e in load("benchmarks/results/verl_agent_loop/summary.json")["envs"]}
    return (f"{envs['WebShop-v0']['loop_ms_median']:.1f} ms a step (WebShop-v0), "
            f"{envs['ALFWorld-v0']['loop_ms_median']:.1f} ms (ALFWorld-v0)")


ROWS: tuple[Row, ...] = (
    Row("`make demo`: the tiny model, GAGPO, WebShop-v0, 300 held-out goals", demo,
        (("demo", "benchmarks/results/demo/README.md"),)),
    Row("SmolLM2-135M, WebShop-v0: 3 seeds each of GAGPO and GRPO from one warm start, paired "
        "on 200 held-out goals", fair_comparison,
        (("fair_run", "studies/real_model/results/fair_run/README.md"),)),
    Row("SmolLM2-135M, ALFWorld-v0: warm start -> 6 iterations of GAGPO, 24 held-out games",
        alfworld_wins,
        (("alfworld_wins", "studies/real_model/results/alfworld_wins/README.md"),)),
    Row("ground-truth credit: correlation with the true advantage, shop / house MDPs",
        credit("corr", ("shop", "house")),
        (("credit_truth", "benchmarks/results/credit_truth/report.txt"),)),
    Row("ground-truth credit: a policy-gradient step's gain, share of the true one's, shop / "
        "house / tree", credit("gain", ("shop", "house", "tree")),
        (("credit_truth", "benchmarks/results/credit_truth/report.txt"),)),
    Row("WebShop-v0 in-process step, median", webshop_step,
        (("webshop_bench", "benchmarks/results/webshop_bench/report.txt"),)),
    Row("ALFWorld-v0 step, native engine against the reference, all sizes", alfworld_step,
        (("alfworld_bench", "benchmarks/results/alfworld_bench/report.txt"),)),
    Row("`gagpo serve env`, 64 concurrent sessions x 2,000 steps", served,
        (("openenv_serve", "benchmarks/results/openenv_serve/report.txt"),)),
    Row("verl's agent loop around our envs, 64 trajectories at once, scripted model", verl_loop,
        (("verl_agent_loop", "benchmarks/results/verl_agent_loop/report.txt"),)),
)


def table(rows: Sequence[Row] = ROWS) -> str:
    """The Markdown table of ``rows``.

    Raises:
        ValueError: more than :data:`MAX_ROWS` rows, or a cell over :data:`MAX_WORDS` words.
    """
    if len(rows) > MAX_ROWS:
        raise ValueError(f"{len(rows)} rows; the table holds at most {MAX_ROWS}")
    lines = ["| what | figure | recorded in |", "|---|---|---|"]
    for row in rows:
        cells = row.cells()
        for cell in cells[:2]:
            words = len(re.sub(r"[`*]", "", cell).split())
            if words > MAX_WORDS:
                raise ValueError(f"a cell of {words} words (at most {MAX_WORDS}): {cell!r}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def webshop_table() -> str:
    """docs/benchmarks.md's WebShop-v0 table, from webshop_bench's summary."""
    d = load("benchmarks/results/webshop_bench/summary.json")
    big, mid, small = "1,200,000", "100,000", "1,000"
    rows = [
        ("in-process step, median (1k catalog, expert episodes)",
         f"{d['step_median_ms']:.3f} ms ({d['steps_per_s']:,.0f} steps/s)",
         f"< 0.1 ms; the original ~15 ms ({d['speedup_vs_original']:.0f}x)"),
        ("in-process reset, median", f"{d['reset_median_ms']:.3f} ms", ""),
        ("step over HTTP (JSON API, waitress, loopback)",
         f"{d['http_step_median_ms']:.2f} ms ({d['http_steps_per_s']:,.0f} steps/s)", ""),
        *[(f"search p50 / p99, {label} products",
           f"{d[f'{n}:search_p50_ms']:.2f} / {d[f'{n}:search_p99_ms']:.2f} ms", target)
          for n, label, target in ((small, "1k", ""), (mid, "100k", "< 2 ms"),
                                   (big, "1.2M", "< 10 ms")) if f"{n}:search_p50_ms" in d],
    ]
    if f"{big}:rss_mb" in d:
        rows += [
            ("serving process memory, 1.2M products (200 expert episodes played)",
             f"{d[f'{big}:rss_mb']:.0f} MB", "< 2 GB"),
            ("generate / convert / index 1.2M products",
             f"{d[f'{big}:generate_s']:.0f} s / {d[f'{big}:convert_s']:.0f} s / "
             f"{d[f'{big}:index_s']:.0f} s (once; cached)",
             "the original: 15 GB RAM, 30-90 s per start"),
            ("open a cached 1.2M catalog",
             f"{d[f'{big}:reopen_ms']:.1f} ms ({d[f'{big}:hash_s']:.1f} s to hash its files "
             f"where their digests are not remembered); index {d[f'{big}:index_open_ms']:.0f} ms "
             "(memory-mapped)", ""),
        ]
    lines = ["| what | measured | target / original |", "|---|---|---|"]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


def alfworld_table() -> str:
    """docs/benchmarks.md's ALFWorld-v0 engines table, from alfworld_bench's summary."""
    scenes = load("benchmarks/results/alfworld_bench/summary.json")["scenes"]
    lines = ["| scene | step: native | reference | stock | reset, new game: native | reference "
             "| reset, played game: native | reference |", "|---|---|---|---|---|---|---|---|"]
    for name in ("small", "medium", "large"):
        d = scenes[name]
        lines.append(
            f"| {name} ({d['receptacles']}) | {d['step_native_ms']:.3f} ms | "
            f"{d['step_reference_ms']:.2f} ms ({d['step_ratio']:.0f}x) | "
            f"{d['step_stock_ms']:.1f} ms | {d['reset_new_native_ms']:.1f} ms | "
            f"{d['reset_new_reference_ms']:.0f} ms | {d['reset_played_native_ms']:.2f} ms | "
            f"{d['reset_played_reference_ms']:.1f} ms |")
    return "\n".join(lines)


@dataclass(frozen=True)
class Block:
    """A part of a page that this module makes: between its two marker lines."""

    page: Path
    name: str
    make: Callable[[], str]

    @property
    def start(self) -> str:
        return (f"<!-- {self.name}: made by `python -m benchmarks.figures` from the "
                "summaries; do not edit -->")

    @property
    def end(self) -> str:
        return f"<!-- end of {self.name} -->"

    def made(self, text: str) -> str:
        """``text`` with this block's part made anew."""
        start, end = text.find(self.start), text.find(self.end)
        if start < 0 or end < start:
            raise ValueError(f"{self.page.relative_to(ROOT)} has no {self.start!r} ... "
                             f"{self.end!r} markers")
        return text[:start + len(self.start)] + "\n" + self.make() + "\n" + text[end:]


BLOCKS: tuple[Block, ...] = (
    Block(README, "results", table),
    Block(ROOT / "docs" / "benchmarks.md", "webshop speed", webshop_table),
    Block(ROOT / "docs" / "benchmarks.md", "alfworld engines", alfworld_table),
)
"""Every part of a page made from the summaries."""


def write_summaries() -> list[Path]:
    """Each :data:`SUMMARIZED` report's ``summary.json``, made anew from its ``report.txt``."""
    written = []
    for folder, module in SUMMARIZED.items():
        summarize = importlib.import_module(module).summarize
        report = (ROOT / folder / "report.txt").read_text()
        path = ROOT / folder / "summary.json"
        path.write_text(json.dumps(summarize(report), indent=1) + "\n")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a page's table differs from the made one")
    parser.add_argument("--summaries", action="store_true",
                        help="first rewrite the summary.json of the recorded reports")
    args = parser.parse_args(argv)
    if args.summaries:
        for path in write_summaries():
            print(f"wrote {path.relative_to(ROOT)}")
    stale = []
    for block in BLOCKS:
        text = block.page.read_text()
        made = block.made(text)
        if made == text:
            continue
        stale.append(f"{block.page.relative_to(ROOT)}'s {block.name}")
        if not args.check:
            block.page.write_text(made)
            print(f"rewrote {stale[-1]}")
    if args.check and stale:
        print(f"{', '.join(stale)} differ from their summaries: run python -m "
              "benchmarks.figures", file=sys.stderr)
        return 1
    if args.check:
        print("every made table matches its summaries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

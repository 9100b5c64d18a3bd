"""The README's Results table, the docs' tables of figures and every figure quoted in their
prose, made from the reports' machine-readable summaries (:data:`BLOCKS` lists the tables,
:data:`FIGURES` the figures in prose).

Every figure quoted is read from a JSON file written beside its report: a run's own
(``gagpo demo``'s ``evals.json``, ``gagpo eval``'s summaries, ``gagpo compare --out``), a
benchmark's (``credit_truth.json``, ``results.json``), or ``summary.json``, which
:func:`benchmarks.record.recorded` writes from a benchmark's printed report with the
benchmark's own ``summarize`` function (:data:`SUMMARIZED`: a benchmark's folder and each of its
variants' subfolders). Nothing quoted is typed by hand::

    python -m benchmarks.figures            # rewrite the tables and the figures in prose
    python -m benchmarks.figures --check    # exit 1 when a page differs from what is made
    python -m benchmarks.figures --summaries  # rewrite the summary.json of recorded reports

``tests/test_figures.py`` runs the check: a quoted figure that differs from its summary fails.

Two mechanisms, both rewritten in place:

- A table is a :class:`Block`: the lines between its two marker lines. The README's Results
  table is made of :class:`Row` s: what it measures, one figure made from its summaries, and the
  records it links; at most :data:`MAX_ROWS` rows and :data:`MAX_WORDS` words a cell.
- A figure in prose is a span, ``<!-- fig NAME -->VALUE<!-- /fig -->`` (the markers do not
  show in rendered Markdown), anywhere in README.md, the pages of docs/ and the READMEs under
  benchmarks/results/ (:func:`pages`): :data:`FIGURES` maps NAME, ``<results folder>.<what>``
  (``vector_bench.process_ratio``, ``rollout_throughput/8x8_bf16.fast.ratio``), to the function
  that makes VALUE. A span whose VALUE differs, or whose NAME is not in :data:`FIGURES`, fails
  the check, named with its page.

A benchmark's narrative (what each run found) lives in its results folder's README, its figures
spans too, and the docs keep a short paragraph that links it; a study's lives in its own README.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
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

RESULTS = "benchmarks/results"
SUMMARIZED: dict[str, str] = {
    f"{RESULTS}/webshop_bench": "benchmarks.webshop_bench",
    f"{RESULTS}/cpu_costs": "benchmarks.cpu_costs",
    f"{RESULTS}/alfworld_bench": "benchmarks.alfworld_bench",
    f"{RESULTS}/vector_bench": "benchmarks.vector_bench",
    f"{RESULTS}/rollout_overhead": "benchmarks.rollout_overhead",
    f"{RESULTS}/trainer_overhead": "benchmarks.trainer_overhead",
    f"{RESULTS}/update_memory": "benchmarks.update_memory",
    f"{RESULTS}/rollout_throughput": "benchmarks.rollout_throughput",
}
"""Benchmarks whose recorded reports' ``summary.json`` their ``summarize(report_text)`` makes:
the ``report.txt`` of the folder and of each variant's subfolder (:func:`reports`)."""


def load(path: str) -> Any:
    """A summary (JSON) by its path from the repository's root."""
    return json.loads((ROOT / path).read_text())


def summary(folder: str) -> Any:
    """The ``summary.json`` of a results folder (``rollout_throughput/8x8_bf16``)."""
    return load(f"{RESULTS}/{folder}/summary.json")


def reports() -> dict[Path, str]:
    """Each recorded report folder of :data:`SUMMARIZED`, its variants' included (a folder
    under it with a ``report.txt``) -> the module whose ``summarize`` reads it."""
    found = {}
    for folder, module in SUMMARIZED.items():
        for report in sorted((ROOT / folder).rglob("report.txt")):
            found[report.parent] = module
    return found


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
        default = " / ".join(f"{held[s][d['default']][measure]:.2f}" for s in shapes)
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
    Row("ground-truth credit: correlation with the true advantage, shop / house / rare-win "
        "ALFWorld-like MDPs", credit("corr", ("shop", "house", "alfworld")),
        (("credit_truth", "benchmarks/results/credit_truth/report.txt"),)),
    Row("ground-truth credit: a policy-gradient step's gain, share of the true one's, shop / "
        "house / ALFWorld-like / tree", credit("gain", ("shop", "house", "alfworld", "tree")),
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


CREDIT_TRUTH = "benchmarks/results/credit_truth/credit_truth.json"


def credit_shapes() -> str:
    """docs/algorithms.md's shapes table: what a trainer sees of each shape, and of the real
    runs."""
    from benchmarks.credit_truth import stats_table

    d = load(CREDIT_TRUTH)
    return stats_table(d["shapes"], d["real"])


def credit_held_out(within: bool) -> Callable[[], str]:
    """docs/algorithms.md's held-out summary, pooled or within each task."""
    def make() -> str:
        from benchmarks.credit_truth import Figures, figures_table

        d = load(CREDIT_TRUTH)
        held = {s: {n: Figures(**f) for n, f in v.items()} for s, v in d["held_out"].items()}
        return figures_table(held, d["summary"], within)
    return make


def credit_verdicts(which: str) -> Callable[[], str]:
    """docs/algorithms.md's paired verdicts of the ``default`` GAGPO (or the ``previous``
    one)."""
    def make() -> str:
        from benchmarks.credit_truth import verdict_table

        d = load(CREDIT_TRUTH)
        return verdict_table(d[which], d["verdicts"][d[which]])
    return make


def credit_training(folder: str) -> Callable[[], str]:
    """docs/algorithms.md's training runs: every ``credit_assignment.md`` under ``folder``,
    one row per env, policy and method (success over the whole run and its last quarter, the
    credit quality measured in the same runs)."""
    def make() -> str:
        from benchmarks.credit_assignment import summarize

        def cell(x: list[float] | None) -> str:  # no s.e. (nan) for a single run
            if x is None:
                return "-"
            return f"{x[0]:.1f}" if math.isnan(x[1]) else f"{x[0]:.1f} ± {x[1]:.1f}"

        lines = ["| env | policy | method | seeds | success, whole run | last quarter | "
                 "Pearson r with the true advantage |", "|---|---|---|---|---|---|---|"]
        for path in sorted((ROOT / folder).glob("*/credit_assignment.md")):
            d = summarize(path.read_text())
            r = {(c["env"], c["policy"], c["estimator"]): c["pearson"] for c in d["credit"]}
            for x in d["success"]:
                p = r.get((x["env"], x["policy"], x["method"]))
                lines.append(f"| {x['env']} | {x['policy']} | {x['method']} (lr {x['lr']:g}) | "
                             f"{x['seeds']} | {cell(x['whole_run'])} | "
                             f"{cell(x['last_quarter'])} | "
                             f"{'-' if p is None else f'{p[0]:.2f} ± {p[1]:.2f}'} |")
        return "\n".join(lines)
    return make


ALGORITHMS = ROOT / "docs" / "algorithms.md"

BLOCKS: tuple[Block, ...] = (
    Block(README, "results", table),
    Block(ALGORITHMS, "credit shapes", credit_shapes),
    Block(ALGORITHMS, "credit pooled", credit_held_out(False)),
    Block(ALGORITHMS, "credit within tasks", credit_held_out(True)),
    Block(ALGORITHMS, "credit verdicts", credit_verdicts("default")),
    Block(ALGORITHMS, "credit verdicts of the previous default", credit_verdicts("previous")),
    Block(ALGORITHMS, "credit training runs",
          credit_training("benchmarks/results/credit_assignment/shared_2_flat")),
    Block(ROOT / "docs" / "benchmarks.md", "webshop speed", webshop_table),
    Block(ROOT / "docs" / "benchmarks.md", "alfworld engines", alfworld_table),
)
"""Every part of a page made from the summaries."""


# The figures in prose: FIGURES, made from the summaries by these helpers, and their spans.

def hundreds(x: float) -> str:
    return f"{round(x, -2):,.0f}"


def times(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}f}x"


def small(x: float) -> str:
    """A log-prob gap: ``1.4e-3``."""
    return f"{x:.1e}".replace("e-0", "e-")


def get(folder: str, key: str) -> Any:
    """``key`` (dotted: ``sides.fast.ratio``; a list's item by its index) of a results folder's
    ``summary.json``."""
    value = summary(folder)
    for part in key.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def fig(folder: str, key: str, form: Callable[[Any], str] | str = "{:,}") -> Callable[[], str]:
    """The figure ``key`` of ``folder``'s summary, written by ``form`` (a function, or a
    format string)."""
    write = form.format if isinstance(form, str) else form
    return lambda: write(get(folder, key))


def ratio_of(a: tuple[str, str], b: tuple[str, str], form: Callable[[float], str] = times
             ) -> Callable[[], str]:
    """``a / b``, each ``(folder, key)``: a ratio that no one report prints (two runs, or two
    rows of one)."""
    return lambda: form(get(*a) / get(*b))


def overhead_python_us() -> str:
    d = summary("rollout_overhead")["WebShop-v0"]
    return f"{1e3 * (d['rollout_ms'] - d['raw_ms']):.0f} us"


def overhead_on_original() -> str:
    """The rollout machinery's time per WebShop-v0 step, as a share of the original's ~15 ms."""
    d = summary("rollout_overhead")["WebShop-v0"]
    return pct((d["rollout_ms"] - d["raw_ms"]) / 15)


def starts_fewer_tokens() -> str:
    """Prompt tokens computed with shared starts, fewer than without (the same prompts)."""
    starts = get("rollout_throughput/8x8_bf16_starts", "sides.fast.prefilled_tokens")
    live = get("rollout_throughput/8x8_bf16", "sides.fast.prefilled_tokens")
    return f"{100 * (1 - starts / live):.0f}%"


THROUGHPUT_RUN = {"prompts": "{:,}", "prefill_fewer": times, "prefix_cache_fewer": times,
                  "bound_ratio": times, "bound_ratio_free_decode": times}
THROUGHPUT_SIDE = {"wall_s": "{:,.0f} s", "prefill_s": "{:,.0f} s", "decode_s": "{:,.0f} s",
                   "prefilled_tokens": "{:,}", "new_tokens": "{:,}", "shared_pct": "{:.1f}%",
                   "prompt_tok_per_s": "{:,.0f}", "new_tok_per_s": "{:,.0f}",
                   "peak_rss_gb": "{:.2f} GB", "logprob_gap_mean": small,
                   "logprob_gap_max": small, "ratio": times, "ratio_per_new_token": times}


def throughput_figures() -> dict[str, Callable[[], str]]:
    """Each recorded ``rollout_throughput`` run's figures (the folder's own report and each
    variant's), named ``rollout_throughput[/<variant>].<key>`` for the run's own
    (:data:`THROUGHPUT_RUN`) and ``...<side>.<key>`` for a side's (:data:`THROUGHPUT_SIDE`; a
    side the run lacks fails when named); ``...logprob_gap_max`` is the worst of its sides, and
    ``...prefill_ratio``, ``...decode_ratio`` today's seconds over the fast side's."""
    made: dict[str, Callable[[], str]] = {}
    base = ROOT / RESULTS
    for found in reports():
        if not found.is_relative_to(base / "rollout_throughput"):
            continue
        folder = found.relative_to(base).as_posix()
        for key, form in THROUGHPUT_RUN.items():
            made[f"{folder}.{key}"] = fig(folder, key, form)
        for side in ("today", "fast", "vllm"):
            for key, form in THROUGHPUT_SIDE.items():
                made[f"{folder}.{side}.{key}"] = fig(folder, f"sides.{side}.{key}", form)
        made[f"{folder}.logprob_gap_max"] = (lambda f=folder: small(max(
            side["logprob_gap_max"] for side in summary(f)["sides"].values())))
        for part in ("prefill", "decode"):
            made[f"{folder}.{part}_ratio"] = ratio_of(
                (folder, f"sides.today.{part}_s"), (folder, f"sides.fast.{part}_s"),
                lambda x: times(x, 1))
    return made


RT = "rollout_throughput"
FIGURES: dict[str, Callable[[], str]] = {
    "alfworld_bench.step_ratio": fig("alfworld_bench", "step_ratio", "{:.0f}x"),
    **{f"cpu_costs.decode_{rows}": fig("cpu_costs", f"decode.{rows}.tok_per_s", "{:.0f}")
       for rows in (8, 64)},
    "alfworld_bench.first_game": fig("alfworld_bench", "first_game_native_ms", "{:.0f} ms"),
    **{f"alfworld_bench.memory.{engine}.{which}": fig(
        "alfworld_bench", f"memory_mb.{engine}.{which}", "{:.1f} MB")
       for engine in ("native", "reference") for which in ("first_env", "further_env")},
    "vector_bench.inprocess": fig("vector_bench", "backends.inprocess.steps_per_s", hundreds),
    "vector_bench.process": fig("vector_bench", "backends.process.steps_per_s", hundreds),
    "vector_bench.process_ratio": fig("vector_bench", "backends.process.ratio", times),
    "vector_bench.ray": fig("vector_bench", "backends.ray.steps_per_s", hundreds),
    "vector_bench.ray_ratio": fig("vector_bench", "backends.ray.ratio", times),
    "vector_bench/alfworld.native": fig("vector_bench/alfworld",
                                        "engines.native.steps_per_s", "{:,.0f}"),
    "vector_bench/alfworld.reference": fig("vector_bench/alfworld",
                                           "engines.reference.steps_per_s", "{:,.0f}"),
    "vector_bench/alfworld.ratio": fig("vector_bench/alfworld", "engines.native.ratio",
                                       "{:.0f}x"),
    "rollout_overhead.alfworld": fig("rollout_overhead", "ALFWorld-v0.overhead_pct", "{:.1f}%"),
    "rollout_overhead.alfworld_step": fig("rollout_overhead", "ALFWorld-v0.raw_ms",
                                          "{:.2f} ms"),
    "rollout_overhead.webshop": fig("rollout_overhead", "WebShop-v0.overhead_pct", "{:.1f}%"),
    "rollout_overhead.webshop_step": fig("rollout_overhead", "WebShop-v0.raw_ms", "{:.3f} ms"),
    "rollout_overhead.webshop_python": overhead_python_us,
    "rollout_overhead.webshop_on_original": overhead_on_original,
    "trainer_overhead.outside": fig("trainer_overhead", "outside_pct", "{:.1f}%"),
    "trainer_overhead/demo.outside": fig("trainer_overhead/demo", "outside_pct", "{:.1f}%"),
    "trainer_overhead/demo.last_other": fig("trainer_overhead/demo", "last_other_pct",
                                            "{:.1f}"),
    "update_memory/packed.rows": fig("update_memory/packed", "rows"),
    "update_memory/packed.distinct_prompts": fig("update_memory/packed", "distinct_prompts"),
    "update_memory/packed.padded_s": fig("update_memory/packed", "settings.0.seconds",
                                         "{:,.0f} s"),
    "update_memory/packed.padded_tokens": fig("update_memory/packed", "settings.0.tokens_run"),
    "update_memory/packed.packed_s": fig("update_memory/packed", "settings.1.seconds",
                                         "{:,.0f} s"),
    "update_memory/packed.packed_tokens": fig("update_memory/packed", "settings.1.tokens_run"),
    "update_memory/packed.speedup": ratio_of(("update_memory/packed", "settings.0.seconds"),
                                             ("update_memory/packed", "settings.1.seconds")),
    "update_memory/packed.padded_rss": fig("update_memory/packed", "settings.0.peak_rss_gb",
                                           "{:.2f}"),
    "update_memory/packed.packed_rss": fig("update_memory/packed", "settings.1.peak_rss_gb",
                                           "{:.2f} GB"),
    "update_memory/heap.glibc_rss": fig("update_memory/heap", "settings.0.peak_rss_gb",
                                        "{:.2f} GB"),
    "update_memory/heap.mmap_rss": fig("update_memory/heap", "settings.1.peak_rss_gb",
                                       "{:.2f} GB"),
    "update_memory/heap.cpu_ratio": ratio_of(("update_memory/heap", "settings.1.cpu_seconds"),
                                             ("update_memory/heap", "settings.0.cpu_seconds")),
    "update_memory/reference.fp32_rss": fig("update_memory/reference", "settings.0.peak_rss_gb",
                                            "{:.2f}"),
    "update_memory/reference.amp_rss": fig("update_memory/reference", "settings.1.peak_rss_gb",
                                           "{:.2f} GB"),
    **throughput_figures(),
    f"{RT}/8x8.quarter_wall": fig(f"{RT}/8x8", "sides.today.wall_s", lambda s: f"{s / 4:.0f} s"),
    f"{RT}/8x8_bf16_starts.fewer_tokens": starts_fewer_tokens,
    f"{RT}/8x8_bf16_vllm.vllm_over_fast": ratio_of((f"{RT}/8x8_bf16_vllm", "sides.fast.wall_s"),
                                                   (f"{RT}/8x8_bf16_vllm", "sides.vllm.wall_s"),
                                                   lambda x: times(x, 1)),
    f"{RT}/8x8_bf16_vllm.vllm_over_starts_today": ratio_of(
        (f"{RT}/8x8_bf16_starts", "sides.today.wall_s"),
        (f"{RT}/8x8_bf16_vllm", "sides.vllm.wall_s"), lambda x: times(x, 1)),
    f"{RT}/vllm_replay.vllm_over_avx2_today": ratio_of(
        (f"{RT}/avx2", "sides.today.wall_s"), (f"{RT}/vllm_replay", "sides.vllm.wall_s")),
    f"{RT}/vllm_replay.vllm_over_avx2_fast": ratio_of(
        (f"{RT}/avx2", "sides.fast.wall_s"), (f"{RT}/vllm_replay", "sides.vllm.wall_s")),
}
"""Every figure a page quotes in prose, by name (``<results folder>.<what>``): a span
``<!-- fig NAME -->VALUE<!-- /fig -->`` holds what ``FIGURES[NAME]()`` makes."""

SPAN = re.compile(r"<!-- fig (?P<name>\S+) -->(?P<value>[^<]*)<!-- /fig -->")
OPENED = re.compile(r"<!-- fig (\S+) -->")
LINE_START = re.compile(r"\s*(?:(?:[-*+>]|\d+[.)])\s*)?")
"""What may precede a span that starts a line's text (a list's or a quote's marker)."""


def pages() -> list[Path]:
    """The pages whose spans are made: README.md, every page of docs/ and every README under
    benchmarks/results/ (not the frozen studies')."""
    return [README, *sorted((ROOT / "docs").rglob("*.md")),
            *sorted((ROOT / RESULTS).rglob("README.md"))]


def spans_made(text: str) -> tuple[str, list[str], list[str]]:
    """``text`` with each span's VALUE made anew; the spans whose VALUE differed
    (``"NAME: 'old' here, 'new' made"``); and the broken ones: an unknown NAME, an opening
    marker that no ``<!-- /fig -->`` closes (a VALUE holds no ``<``), or a span that starts a
    line (Markdown would read the line as raw HTML)."""
    differ, broken = [], []

    def made(m: re.Match) -> str:
        name, value = m["name"], m["value"]
        if name not in FIGURES:
            broken.append(f"{name}: no such figure (benchmarks.figures.FIGURES)")
            return m[0]
        new = FIGURES[name]()
        if new != value:
            differ.append(f"{name}: {value!r} here, {new!r} made")
        return f"<!-- fig {name} -->{new}<!-- /fig -->"

    result = SPAN.sub(made, text)
    closed = {m.start() for m in SPAN.finditer(text)}
    for m in OPENED.finditer(text):
        if m.start() not in closed:
            broken.append(f"{m[1]}: not closed by <!-- /fig -->")
        if LINE_START.fullmatch(text[text.rfind("\n", 0, m.start()) + 1:m.start()]):
            broken.append(f"{m[1]}: starts a line (put a word before it)")
    return result, differ, broken


def write_summaries() -> list[Path]:
    """Each :func:`reports` folder's ``summary.json``, made anew from its ``report.txt``."""
    written = []
    for folder, module in reports().items():
        summarize = importlib.import_module(module).summarize
        path = folder / "summary.json"
        path.write_text(json.dumps(summarize((folder / "report.txt").read_text()), indent=1)
                        + "\n")
        written.append(path)
    return written


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a page's table or figure differs from the made one")
    parser.add_argument("--summaries", action="store_true",
                        help="first rewrite the summary.json of the recorded reports")
    args = parser.parse_args(argv)
    if args.summaries:
        for path in write_summaries():
            print(f"wrote {shown(path)}")
    stale, wrong = [], []
    for block in BLOCKS:
        text = block.page.read_text()
        made = block.made(text)
        if made == text:
            continue
        stale.append(f"{shown(block.page)}'s {block.name}")
        if not args.check:
            block.page.write_text(made)
            print(f"rewrote {stale[-1]}")
    for page in pages():
        text = page.read_text()
        made, differ, broken = spans_made(text)
        wrong += [f"{shown(page)}: figure {problem}" for problem in
                  (differ if args.check else []) + broken]
        if made != text and not args.check:
            page.write_text(made)
            print(f"rewrote {shown(page)}'s figures")
    if args.check and stale:
        print(f"{', '.join(stale)} differ from their summaries", file=sys.stderr)
    if wrong:
        print("\n".join(wrong), file=sys.stderr)
    if (args.check and stale) or wrong:
        print("run python -m benchmarks.figures (a figure's name must be in "
              "benchmarks.figures.FIGURES)", file=sys.stderr)
        return 1
    if args.check:
        print("every made table and figure matches its summaries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

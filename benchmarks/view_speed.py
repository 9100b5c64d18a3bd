"""How fast ``gagpo view`` opens a large run: 200 iterations of 1,000 steps each.

The run is synthetic but written by the trainer's own writer
(:mod:`gagpo.synthetic_run`: :func:`gagpo.run_folder.save_step_table`, WebShop-sized pages)
plus a ``metrics.jsonl`` of the trainer's keys. The viewer's app is then asked, in this
process, for the run page (cold: no table read before; then warm) and for task groups of
several iterations, each timed, with the process's peak memory (ru_maxrss) before and after.
Targets (the issue): run page < 1 s, a group < 0.5 s, memory bounded (tables read lazily).

    python -m benchmarks.view_speed [--iterations 200] [--steps 1000] [--out REPORT.md]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from gagpo.synthetic_run import synthetic_run


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(run: Path) -> dict[str, float]:
    """Seconds for the run page (cold and warm) and for groups of several iterations, and peak
    memory (MB) before and after."""
    from gagpo.viewer.app import create_app

    client = create_app([run]).test_client()
    out = {"rss_before_mb": _rss_mb()}
    t = time.perf_counter()
    assert client.get(f"/run?r={run.name}").status_code == 200
    out["run_page_cold_s"] = time.perf_counter() - t
    t = time.perf_counter()
    assert client.get(f"/run?r={run.name}").status_code == 200
    out["run_page_warm_s"] = time.perf_counter() - t
    iterations = sorted(int(p.name[5:10]) for p in (run / "steps").glob("iter_*.npz"))
    times = []
    for it in iterations[:: max(1, len(iterations) // 10)]:
        for group in (0, 3):
            t = time.perf_counter()
            r = client.get(f"/run/{run.name}/iter/{it}?group={group}")
            times.append(time.perf_counter() - t)
            assert r.status_code == 200 and b'class="rollouts"' in r.data
    out["group_max_s"], out["group_median_s"] = max(times), float(np.median(times))
    out["groups_timed"] = len(times)
    out["rss_after_mb"] = _rss_mb()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--out", default=None, help="write the report (markdown) here")
    args = p.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="view-speed-"))
    try:
        run = folder / "big-run"
        t = time.perf_counter()
        synthetic_run(run, args.iterations, args.steps)
        written = time.perf_counter() - t
        size_mb = sum(f.stat().st_size for f in (run / "steps").iterdir()) / 2**20
        m = measure(run)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ok = m["run_page_cold_s"] < 1 and m["group_max_s"] < 0.5
    report = "\n".join([
        "# gagpo view on a large run",
        "",
        f"`python -m benchmarks.view_speed --iterations {args.iterations} --steps "
        f"{args.steps}`: a synthetic run written by `run_folder.save_step_table` "
        f"({args.iterations} step tables of about {args.steps} steps, replies and ~1.2 kB "
        f"observations kept; {size_mb:.0f} MB on disk, written in {written:.0f} s), opened "
        "by the viewer's app in one process (Flask test client, no network).",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| run page, first open (every table's columns read once) | "
        f"{m['run_page_cold_s']:.3f} s | < 1 s |",
        f"| run page, reload | {m['run_page_warm_s']:.3f} s | |",
        f"| one task group (G columns), slowest of {m['groups_timed']} | "
        f"{m['group_max_s']:.3f} s | < 0.5 s |",
        f"| one task group, median | {m['group_median_s']:.3f} s | |",
        f"| peak memory before / after | {m['rss_before_mb']:.0f} / "
        f"{m['rss_after_mb']:.0f} MB | bounded |",
        "",
        f"Targets met: {'yes' if ok else 'NO'}.",
    ])
    print(report)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(report + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

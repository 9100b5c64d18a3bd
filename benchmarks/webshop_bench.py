"""WebShop-v0 speed and memory, measured side by side in one run.

Prints: in-process step time (median, p90) and steps/s, the same over HTTP against a served
shop on loopback, reset time, search latency (p50/p99) at 1k and 100k generated products,
catalog generation, loading and index build time, and memory. The original WebShop spends
about 15 ms per text step (webshop.md); the ratio to it is printed too.

    python -m benchmarks.webshop_bench [--large N] [--out DIR]   # --large 1200000: full size

The figures of docs/benchmarks.md: ``--large 1200000 --out benchmarks/results/webshop_bench``
(the 1.2M catalog is generated, converted and indexed on first use, about ten minutes and
several GB of memory, then cached).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import psutil

from benchmarks.record import command_line, recorded

ORIGINAL_STEP_MS = 15.0


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def percentiles(xs: list[float]) -> tuple[float, float, float]:
    a = np.asarray(xs) * 1e3
    return float(np.median(a)), float(np.percentile(a, 90)), float(np.percentile(a, 99))


def expert_transcripts(shop, goals: range) -> list[list[str]]:
    from gagpo.envs.webshop.expert import expert_action

    out = []
    for g in goals:
        state, actions = shop.initial_state(g), []
        while (a := expert_action(shop, state)) is not None and len(actions) < 15:
            actions.append(a)
            state = shop.step(state, a).state
        out.append(actions)
    return out


def time_env(env, transcripts, goals) -> tuple[list[float], list[float]]:
    steps, resets = [], []
    for g, actions in zip(goals, transcripts, strict=True):
        t = time.perf_counter()
        env.reset(options={"task": g})
        resets.append(time.perf_counter() - t)
        for a in actions:
            t = time.perf_counter()
            env.step(a)
            steps.append(time.perf_counter() - t)
    return steps, resets


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_env(n_goals: int = 300) -> None:
    import gymnasium as gym
    from waitress.server import create_server

    import gagpo.envs  # noqa: F401
    from gagpo.servers.webshop.web.app import create_app

    local = gym.make("WebShop-v0").unwrapped
    shop = local._backend.shop
    goals = range(n_goals)
    transcripts = expert_transcripts(shop, goals)
    time_env(local, transcripts, goals)  # warm the search cache as a long run would be
    steps, resets = time_env(local, transcripts, goals)
    med, p90, _ = percentiles(steps)
    print(f"in-process step   median {med:.4f} ms  p90 {p90:.4f} ms  "
          f"{1e3 / med:,.0f} steps/s  ({ORIGINAL_STEP_MS / med:,.0f}x faster than the "
          f"original's ~{ORIGINAL_STEP_MS:.0f} ms)")
    print(f"in-process reset  median {percentiles(resets)[0]:.4f} ms")

    port = free_port()
    server = create_server(create_app(shop), host="127.0.0.1", port=port, threads=4)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    remote = gym.make("WebShop-v0", server_url=f"http://127.0.0.1:{port}").unwrapped
    few = range(min(100, n_goals))
    r_steps, r_resets = time_env(remote, transcripts[: len(few)], few)
    rmed, rp90, _ = percentiles(r_steps)
    print(f"HTTP step         median {rmed:.3f} ms  p90 {rp90:.3f} ms  "
          f"{1e3 / rmed:,.0f} steps/s  (x{rmed / med:,.0f} the in-process step)")
    print(f"HTTP reset        median {percentiles(r_resets)[0]:.3f} ms")
    remote.close()
    server.close()


def bench_search(n_products: int, queries: int = 500) -> None:
    """Catalog generation, conversion and index build (timed when not cached yet: the
    catalogs stay in the gagpo cache so that reruns are quick), search latency and serving
    memory for a generated catalog of ``n_products``."""
    from gagpo.servers.webshop import generated_catalog_dir
    from gagpo.servers.webshop.catalog import find_catalog_files, load_catalog
    from gagpo.servers.webshop.goals import build_goals
    from gagpo.servers.webshop.search import SearchEngine

    def timed(fn):
        t = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - t

    folder, t_gen = timed(lambda: generated_catalog_dir(n_products))
    catalog, t_load = timed(lambda: load_catalog(folder))
    # Reopening: the files' digests are remembered, so only a cache that lacks them rehashes.
    _, t_reopen = timed(lambda: load_catalog(folder))
    _, t_hash = timed(lambda: [hash_file(f) for f in find_catalog_files(folder).values()])
    engine, t_index = timed(lambda: SearchEngine(catalog, cache_size=0))
    engine, t_open = timed(lambda: SearchEngine(catalog, cache_size=0))
    goals = build_goals(catalog, "human")
    texts = [goals[i].instruction_text for i in range(min(queries, len(goals)))]
    for q in texts[:20]:
        engine.search(q)
    lat = []
    for q in texts:
        t = time.perf_counter()
        engine._search(q, 50)
        lat.append(time.perf_counter() - t)
    p50, _, p99 = percentiles(lat)
    serving = serving_memory_mb(n_products)
    print(f"{n_products:>9,} products: generate {t_gen:6.1f} s, convert {t_load:5.1f} s, "
          f"index build {t_index:6.1f} s (near 0: cached), index open (mmap) "
          f"{t_open * 1e3:5.1f} ms, search p50 {p50:.2f} ms p99 {p99:.2f} ms, "
          f"serving process {serving:,.0f} MB RSS")
    print(f"{'':>9}  reopen the converted catalog {t_reopen * 1e3:.1f} ms (file digests "
          f"remembered); hashing its files, what a first open in a fresh cache adds: "
          f"{t_hash:.1f} s")


def hash_file(path: Path) -> bytes:
    """What opening a catalog costs when its files' digests are not remembered yet."""
    h = hashlib.blake2b()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.digest()


SERVE_PROBE = """
import sys, psutil
from gagpo.servers.webshop import open_shop
from gagpo.servers.webshop.observe import describe
from gagpo.envs.webshop.expert import expert_action
shop = open_shop(num_products=int(sys.argv[1]))
for g in range(min(200, len(shop.goals))):
    state = shop.initial_state(g)
    while (a := expert_action(shop, state)) is not None:
        state = shop.step(state, a).state
        describe(shop, state)
print(psutil.Process().memory_info().rss / 2**20)
"""


def serving_memory_mb(n_products: int) -> float:
    """RSS of a fresh process that opens the shop (cached store and index) and plays 200
    expert episodes: what a served shop holds."""
    out = subprocess.run([sys.executable, "-c", SERVE_PROBE, str(n_products)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def summarize(report: str) -> dict[str, float]:
    """The figures of a printed report (what ``benchmarks.figures`` quotes): the in-process
    step's and reset's medians, the step's p90, steps/s and speed-up over the original's ~15
    ms, the HTTP step's median and steps/s, and per catalog size (``"1,000"``...) search p50 and
    p99, generate / convert / index seconds, the serving process's RSS, and the times to reopen
    a converted catalog, hash its files and open its index.

    Raises:
        ValueError: the report lacks a line this reads.
    """
    step = re.search(r"in-process step +median ([\d.]+) ms +p90 ([\d.]+) ms +([\d,]+) "
                     r"steps/s +\((\d+)x faster", report)
    reset = re.search(r"in-process reset +median ([\d.]+) ms", report)
    http = re.search(r"HTTP step +median ([\d.]+) ms +p90 [\d.]+ ms +([\d,]+) steps/s", report)
    if step is None or reset is None or http is None:
        raise ValueError("not a webshop_bench report: no in-process or HTTP step line")
    out: dict[str, float] = {
        "step_median_ms": float(step[1]), "step_p90_ms": float(step[2]),
        "steps_per_s": float(step[3].replace(",", "")), "speedup_vs_original": float(step[4]),
        "reset_median_ms": float(reset[1]), "http_step_median_ms": float(http[1]),
        "http_steps_per_s": float(http[2].replace(",", ""))}
    catalog = re.compile(
        r"^ *([\d,]+) products: generate +([\d.]+) s, convert +([\d.]+) s, index build +"
        r"([\d.]+) s.*?index open \(mmap\) +([\d.]+) ms, search p50 ([\d.]+) ms p99 ([\d.]+) ms,"
        r" serving process (\d+) MB RSS\n +reopen the converted catalog ([\d.]+) ms.*?adds: "
        r"([\d.]+) s", re.M)
    for m in catalog.finditer(report):
        size = m[1]
        for i, name in enumerate(("generate_s", "convert_s", "index_s", "index_open_ms",
                                  "search_p50_ms", "search_p99_ms", "rss_mb", "reopen_ms",
                                  "hash_s"), start=2):
            out[f"{size}:{name}"] = float(m[i])
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", type=int, default=0,
                        help="also measure a generated catalog of this many products")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the report to OUT/report.txt")
    args = parser.parse_args(argv)
    with recorded(args.out, command_line("benchmarks.webshop_bench", argv), summarize):
        print("== WebShop-v0 ==")
        bench_env()
        print(f"process memory after the env runs: {rss_mb():,.0f} MB")
        for n in (1_000, 100_000) + ((args.large,) if args.large else ()):
            bench_search(n)


if __name__ == "__main__":
    main()

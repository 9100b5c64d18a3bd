"""ALFWorld-v0's native engine beside the reference engine and the stock stack, on the same games
and commands, in one run.

For games of three scene sizes (receptacles: up to 15, 16-30, over 30) it times, in one process:

- native: ALFWorld-v0 on our engine (``engine="native"``, the default): reset of a game this
  process has not played before, reset of the same game again, and step;
- reference: ALFWorld-v0 on TextWorld's PDDL backend with our memoising patches
  (``engine="reference"``): the same three;
- stock: ALFWorld's own stack (TextWorld's gym layer over PddlEnv + AlfredDemangler +
  AlfredInfos, as ``AlfredTWEnv`` builds it), patches off: reset (the gym layer reloads the game
  on every reset) and step;

with the same command sequence (a random walk over admissible commands), and compares the three
transcripts at every step. Memory, each kind in a fresh process: the resident size a process's
first env adds above the interpreter with the env package imported, and what each further env
(on another game) adds. Results are on generated games unless ``--data-dir`` points at official
ones, and are labelled accordingly.

    python -m benchmarks.alfworld_bench [--data-dir DIR] [--split train] [--steps 20] [--out DIR]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.record import command_line, recorded

BINS = (("small (<=15 receptacles)", 0, 15), ("medium (16-30)", 16, 30), ("large (>30)", 31, 999))


def _ms(xs: list[float]) -> float:
    return 1e3 * statistics.median(xs)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def pick_games(source, split: str, per_bin: int) -> list[tuple[str, object, tuple[int, int]]]:
    import json

    from gagpo.envs.alfworld.generator import scene_size

    chosen = []
    games = source.games(split)
    for name, lo, hi in BINS:
        n = 0
        for g in games:
            size = scene_size(json.loads(g.path.read_text())["pddl_problem"])
            if lo <= size[1] <= hi:
                chosen.append((name, g, size))
                n += 1
                if n == per_bin:
                    break
    return chosen


def time_stock(path: str, commands: list[str]) -> tuple[list[float], list[float], list]:
    from gagpo.envs.alfworld import engine, speedups

    with speedups.disabled():
        env = engine.start_stock(path)
        resets = []
        for _ in range(2):
            t = time.perf_counter()
            obs, infos = env.reset()
            resets.append(time.perf_counter() - t)
        transcript = [obs[0]]
        steps = []
        for c in commands:
            t = time.perf_counter()
            obs, _, _, infos = env.step([c])
            steps.append(time.perf_counter() - t)
            transcript.append(obs[0])
        env.close()
    return resets, steps, transcript


def commands_for(env, task_id: str, n: int, seed: int) -> tuple[float, list[str]]:
    """A random walk of valid commands (the native env picks them; every engine then replays
    them), and the time of its first reset: a game this process has not played yet."""
    rng = random.Random(seed)
    t = time.perf_counter()
    _, info = env.reset(options={"task": task_id})
    first_reset = time.perf_counter() - t
    out = []
    for _ in range(n):
        c = rng.choice(info["admissible_actions"])
        out.append(c)
        _, _, terminated, _, info = env.step(c)
        if terminated:
            break
    return first_reset, out


def time_env(env, task_id: str, commands: list[str]) -> tuple[float, list[float], list]:
    """Reset (a game played before) and steps of an ALFWorld-v0 env, with its transcript."""
    t = time.perf_counter()
    obs, _ = env.reset(options={"task": task_id})
    same = time.perf_counter() - t
    transcript, steps = [obs], []
    for c in commands:
        t = time.perf_counter()
        obs, *_ = env.step(c)
        steps.append(time.perf_counter() - t)
        transcript.append(obs)
    return same, steps, transcript


_MEMORY_SCRIPT = """
import sys, json
from benchmarks.alfworld_bench import _rss_mb
kind, data_dir, split = sys.argv[1:4]
from gagpo.envs.alfworld.games import GameSource
from gagpo.envs.alfworld.env import AlfworldEnv
from gagpo.envs.alfworld import engine
games = GameSource(data_dir).games(split)
if kind != "native":
    engine.require()
base = _rss_mb()  # the interpreter with the env package imported
envs, rss = [], []
for i in range(5):
    if kind == "stock":
        e = engine.start_stock(str(games[i].path))
        e.reset()
    else:
        e = AlfworldEnv(data_dir=data_dir, split=split, engine=kind)
        e.reset(options={"task": i})
    envs.append(e)
    rss.append(_rss_mb())
print(json.dumps([base] + rss))
"""


def memory_per_env(kind: str, data_dir: str, split: str) -> tuple[float, float]:
    """(MB the first env adds above the interpreter and the env package, MB each further env
    adds: the mean over four more, each on another game), in a fresh process."""
    import json

    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT, kind, data_dir, split],
        capture_output=True,
        text=True,
        check=True,
    )
    rss = json.loads(out.stdout.strip().splitlines()[-1])
    return rss[1] - rss[0], (rss[-1] - rss[1]) / (len(rss) - 2)


def summarize(report: str) -> dict[str, Any]:
    """The figures of a printed report (what ``benchmarks.figures`` quotes): over all scene
    sizes, the step's median on the native engine and the reference (ms) and their ratio; and
    per scene size (``"small"``, ``"medium"``, ``"large"``) the step's and the resets' medians
    on each engine; the process's first game's reset (``first_game_native_ms``, the
    once-per-process work) and each engine's memory (``memory_mb``: the first env, each
    further one), where the report has them.

    Raises:
        ValueError: the report has no "all sizes" line with the reference beside the native.
    """
    line = re.search(r"all sizes: step native ([\d.]+) ms vs reference ([\d.]+) ms \((\d+)x\)",
                     report)
    if line is None:
        raise ValueError("not an alfworld_bench report with the reference engine: no "
                         "'all sizes: step native ... vs reference ...' line")
    out: dict[str, Any] = {"step_native_ms": float(line[1]), "step_reference_ms": float(line[2]),
                           "step_ratio": float(line[3]), "scenes": {}}
    ms = r"([\d.]+) ms"
    for m in re.finditer(rf"^\| (small|medium|large) \(([^)]*)\) \| [\d-]+ \| [\d-]+ \| {ms} \| "
                         rf"{ms} \| {ms} \| (\d+)x \|", report, re.M):
        out["scenes"][m[1]] = {"receptacles": m[2], "step_native_ms": float(m[3]),
                               "step_reference_ms": float(m[4]), "step_stock_ms": float(m[5]),
                               "step_ratio": float(m[6])}
    for m in re.finditer(rf"^\| (small|medium|large) \([^)]*\) \| {ms} \| {ms} \| {ms} \| "
                         rf"{ms} \|", report, re.M):
        out["scenes"].setdefault(m[1], {}).update(
            reset_new_native_ms=float(m[2]), reset_new_reference_ms=float(m[3]),
            reset_played_native_ms=float(m[4]), reset_played_reference_ms=float(m[5]))
    first = re.search(r"the process's first game, .*?: reset ([\d.]+) ms native", report)
    if first:
        out["first_game_native_ms"] = float(first[1])
    for m in re.finditer(r"^memory, (\w+): the first env \+([\d.]+) MB above .*?, \+([\d.]+) MB "
                         r"per further env", report, re.M):
        out.setdefault("memory_mb", {})[m[1]] = {"first_env": float(m[2]),
                                                 "further_env": float(m[3])}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None, help="official-layout folder (default: ours)")
    parser.add_argument("--split", default="train")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--per-bin", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the report to OUT/report.txt")
    args = parser.parse_args(argv)
    with recorded(args.out, command_line("benchmarks.alfworld_bench", argv), summarize):
        run(args)


def run(args: argparse.Namespace) -> None:
    """The benchmark proper: timings, transcripts compared, memory."""
    from gagpo.envs.alfworld import available
    from gagpo.envs.alfworld.env import AlfworldEnv

    native = AlfworldEnv(data_dir=args.data_dir, split=args.split, engine="native")
    data_dir = str(native.source.root)
    shown = data_dir.replace(str(Path.home()), "~", 1)  # no home folder in recorded reports
    print(f"ALFWorld-v0 benchmark: {native.label}, split {args.split}, {shown}")
    reference = available()
    if not reference:
        print("reference and stock engines: alfworld/textworld not installed; native only "
              "(pip install '.[alfworld]')")
    ref = AlfworldEnv(data_dir=args.data_dir, split=args.split, engine="reference") \
        if reference else None
    chosen = pick_games(native.source, args.split, args.per_bin)
    keys = ("size", "nn", "na", "ns", "rn", "ra", "rs", "sr", "ss")
    rows: dict[str, dict[str, list]] = {}
    identical = True
    cold: list[float] = []
    for name, game, size in chosen:
        new, commands = commands_for(native, game.task_id, args.steps, seed=len(chosen))
        same, n_steps, n_text = time_env(native, game.task_id, commands)
        r = rows.setdefault(name, {k: [] for k in keys})
        r["size"].append(size)
        # the process's first game also pays what is done once per process (the grammar's
        # snippets parsed, join code compiled): reported apart
        (r["nn"] if cold else cold).append(new)
        r["na"].append(same)
        r["ns"] += n_steps
        if ref is not None:
            t = time.perf_counter()
            ref.reset(options={"task": game.task_id})
            r["rn"].append(time.perf_counter() - t)
            r_same, r_steps, r_text = time_env(ref, game.task_id, commands)
            s_resets, s_steps, s_text = time_stock(str(game.path), commands)
            identical &= n_text == r_text == s_text
            r["ra"].append(r_same)
            r["rs"] += r_steps
            r["sr"] += s_resets
            r["ss"] += s_steps
        print(f"  {game.task_id}: {size[0]} objects, {size[1]} receptacles, {len(commands)} steps")

    def cell(xs: list[float], digits: int = 2) -> str:
        return f"{_ms(xs):.{digits}f} ms" if xs else "-"

    def ratio(a: list[float], b: list[float]) -> str:
        return f"{_ms(a) / _ms(b):.0f}x" if a and b else "-"

    print()
    print(f"Results on {native.label} (medians; one process; reference = ALFWorld-v0 on "
          "TextWorld's PDDL backend with our patches; stock = ALFWorld's gym stack, no patches):")
    print("| scene | objects | receptacles | step: native | reference | stock "
          "| native vs reference | native vs stock |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        objs = [s[0] for s in r["size"]]
        receps = [s[1] for s in r["size"]]
        print(f"| {name} | {min(objs)}-{max(objs)} | {min(receps)}-{max(receps)} "
              f"| {cell(r['ns'], 3)} | {cell(r['rs'])} | {cell(r['ss'], 1)} "
              f"| {ratio(r['rs'], r['ns'])} | {ratio(r['ss'], r['ns'])} |")
    print()
    print("| scene | reset, new game: native | reference | reset, played game: native "
          "| reference | stock reset (reloads) |")
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {cell(r['nn'], 1)} | {cell(r['rn'], 0)} | {cell(r['na'])} "
              f"| {cell(r['ra'], 1)} | {cell(r['sr'], 0)} |")
    every = {k: [x for r in rows.values() for x in r[k]] for k in keys[1:]}
    print(f"(the process's first game, {chosen[0][1].task_id}, not in the medians: reset "
          f"{1e3 * cold[0]:.1f} ms native, also the once-per-process work)")
    print()
    print(f"all sizes: step native {cell(every['ns'], 3)} vs reference {cell(every['rs'])} "
          f"({ratio(every['rs'], every['ns'])}) vs stock {cell(every['ss'], 1)} "
          f"({ratio(every['ss'], every['ns'])}); reset of a new game native "
          f"{cell(every['nn'], 1)} (max {1e3 * max(every['nn']):.1f} ms) vs reference "
          f"{cell(every['rn'], 0)}; of a played game native {cell(every['na'])} "
          f"(max {1e3 * max(every['na']):.2f} ms) vs reference {cell(every['ra'], 1)}")
    if ref is not None:
        print("identical transcripts (native, reference and stock, every step): "
              f"{'yes' if identical else 'NO'}")
        ref.close()
    native.close()
    for kind in ("native", "reference", "stock") if reference else ("native",):
        first, each = memory_per_env(kind, data_dir, args.split)
        print(f"memory, {kind}: the first env +{first:.1f} MB above the interpreter and the env "
              f"package, +{each:.1f} MB per further env (another game)")


if __name__ == "__main__":
    main()

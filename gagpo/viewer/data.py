"""What the viewer reads: run folders (through :mod:`gagpo.run_folder`, the one module that
knows their layout) and ``gagpo eval --out`` folders (``trajectories.jsonl``).

Everything is read on request, so a run still going shows its new iterations on reload. Step
tables are opened lazily, one column at a time; what is computed from a whole table (an
iteration's share of malformed replies and of zero-advantage steps) is cached by the file's
size and modification time, in a cache of bounded size.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gagpo.run_folder import (
    UnreadableTable,
    read_json,
    read_metrics,
    read_step_table,
    step_tables,
)

EVAL_FILE = "trajectories.jsonl"


@dataclass(frozen=True)
class Run:
    """A folder the viewer shows: a training run or an evaluation's output."""

    name: str
    path: Path
    kind: str  # "train" | "eval"

    @property
    def exists(self) -> bool:
        return self.path.is_dir()


def looks_like_run(path: Path) -> str | None:
    """``train`` or ``eval`` when ``path`` holds what a run or an evaluation writes."""
    if (path / EVAL_FILE).is_file():
        return "eval"
    if any((path / n).exists() for n in ("config.json", "metrics.jsonl", "steps")):
        return "train"
    return None


def find_runs(roots: list[Path], explicit: bool) -> list[Run]:
    """The runs to list: each of ``roots`` itself when given explicitly (even when missing or
    empty: its page says so), else every run folder under them (two levels deep)."""
    runs: list[Run] = []
    names: set[str] = set()

    def add(path: Path, kind: str | None) -> None:
        name = path.name or str(path)
        while name in names:
            name += "+"
        names.add(name)
        runs.append(Run(name, path, kind or "train"))

    for root in roots:
        if explicit:
            add(root, looks_like_run(root))
            continue
        if not root.is_dir():
            continue
        for child in sorted(root.iterdir()):
            kind = looks_like_run(child) if child.is_dir() else None
            if kind:
                add(child, kind)
            elif child.is_dir():
                for sub in sorted(child.iterdir()):
                    if sub.is_dir() and (k := looks_like_run(sub)):
                        add(sub, k)
    return runs


# ---------------------------------------------------------------------------------------------
# Training runs


class _LRU:
    def __init__(self, size: int) -> None:
        self.size, self.items, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, key: Any) -> Any:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        return None

    def put(self, key: Any, value: Any) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)


_ITER_STATS = _LRU(20_000)  # a few numbers per iteration


def _stamp(paths: list[Path]) -> tuple | None:
    try:
        return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in paths)
    except OSError:
        return None


def iteration_stats(paths: list[Path]) -> dict[str, float] | None:
    """An iteration's shares of malformed replies, of steps whose advantage is exactly 0 and
    of steps in a state no other step of their group visited; None when unreadable."""
    stamp = _stamp(paths)
    if stamp is None:
        return None
    cached = _ITER_STATS.get(stamp)
    if cached is not None:
        return cached
    try:
        t = read_step_table(paths, ["well_formed", "advantage", "state_group_size"])
    except UnreadableTable:
        return None
    n = max(len(t["group"]), 1)
    stats = {"malformed": float((~t["well_formed"]).sum() / n) if "well_formed" in t else math.nan,
             "zero_adv": float((t["advantage"] == 0).sum() / n) if "advantage" in t else math.nan,
             "unshared": float((t["state_group_size"] <= 1).sum() / n)
             if "state_group_size" in t else math.nan}
    _ITER_STATS.put(stamp, stats)
    return stats


def held_out_points(run: Run) -> list[tuple[float, dict[str, float]]]:
    """Held-out evaluations as (iteration, {success, score, length}): ``evals.json``'s
    ``before`` at 0 and the ``eval/*`` metrics of ``metrics.jsonl``."""
    points = []
    evals = read_json(run.path / "evals.json")
    before = evals.get("before") if isinstance(evals, dict) else None
    if isinstance(before, dict) and isinstance(before.get("all"), dict):
        a = before["all"]
        points.append((0.0, {"success": a.get("success"), "score": a.get("score")}))
    for row in read_metrics(run.path):
        if "eval/success" in row:
            points.append((float(row["iteration"]), {"success": row.get("eval/success"),
                                                     "score": row.get("eval/score")}))
    return points


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


#: The run page's charts: (id, title, [(label, metric or source), ...], from zero).
#: A source starting ``@`` is computed from the step tables; ``eval:`` from held-out points.
CHARTS: list[tuple[str, str, list[tuple[str, str]], bool]] = [
    ("success", "success (held-out, training)",
     [("held-out", "eval:success"), ("training", "train/success")], True),
    ("score", "score (held-out, training)",
     [("held-out", "eval:score"), ("training", "train/score")], True),
    ("length", "episode length (steps)", [("training", "train/episode_length")], True),
    ("invalid", "invalid and malformed replies (share of steps)",
     [("invalid or malformed", "train/invalid_rate"), ("malformed", "@malformed")], True),
    ("kl", "KL to the reference (per token)", [("kl", "loss/kl")], True),
    ("entropy", "entropy (per token)", [("entropy", "loss/entropy")], True),
    ("clip", "clip fraction", [("clipped", "loss/clip_frac")], True),
    ("adv", "advantage spread", [("std", "adv/std"), ("IQR", "adv/iqr")], True),
    ("zero_adv", "steps with advantage exactly 0; unshared states (share)",
     [("A = 0", "@zero_adv"), ("state unshared", "@unshared")], True),
    ("gap", "sampler - trainer log-prob gap (per token)",
     [("gap", "rollout/logprob_gap")], True),
    ("tps", "tokens per second",
     [("generation", "perf/gen_tokens_per_s"), ("update", "perf/update_tokens_per_s")], True),
    ("time", "time per iteration (s)",
     [("generation", "time/generation"), ("environments", "time/env"),
      ("update", "time/update")], True),
]


def run_curves(run: Run) -> dict[str, list[tuple[str, list[tuple[float, float]]]]]:
    """``{chart id: [(label, points), ...]}`` for :data:`CHARTS`."""
    metrics = read_metrics(run.path)
    held = held_out_points(run)
    tables = step_tables(run.path)
    stats = {it: iteration_stats(paths) for it, paths in tables.items()}
    curves: dict[str, list[tuple[str, list[tuple[float, float]]]]] = {}
    for chart_id, _, lines, _ in CHARTS:
        out = []
        for label, source in lines:
            if source.startswith("eval:"):
                key = source[5:]
                pts = [(x, _num(v.get(key))) for x, v in held]
            elif source.startswith("@"):
                key = source[1:]
                pts = [(float(it), s[key]) for it, s in stats.items() if s is not None]
            else:
                pts = [(float(r["iteration"]), _num(r.get(source))) for r in metrics
                       if source in r]
            out.append((label, [(x, y) for x, y in pts if math.isfinite(y)]))
        curves[chart_id] = out
    return curves


def run_summary(run: Run) -> dict[str, Any]:
    """What the run list and the run page's header say about a run."""
    cfg = read_json(run.path / "config.json")
    cfg = cfg if isinstance(cfg, dict) else {}
    metrics = read_metrics(run.path)
    return {"config": cfg, "iterations_logged": len(metrics),
            "iterations_planned": cfg.get("iterations"), "algo": cfg.get("algo"),
            "env": cfg.get("env"), "model": cfg.get("model"),
            "last": metrics[-1] if metrics else {}, "tables": list(step_tables(run.path))}


@dataclass
class Step:
    row: int
    trajectory: int
    t: int
    state_key: str
    action: str
    reply: str | None
    observation: str | None
    well_formed: bool | None
    action_valid: bool | None
    reward: float
    score: float
    won: bool
    advantage: float | None
    value: float | None
    critic_value: float | None
    td_error: float | None
    group_size: int | None


@dataclass
class Rollout:
    trajectory: int
    task_id: str
    task_type: str
    won: bool
    score: float
    steps: list[Step]


@dataclass
class Group:
    group: int
    task_id: str
    task_type: str
    rollouts: list[Rollout]


_GROUP_COLUMNS = ["group", "trajectory", "t", "task_id", "task_type", "state_key", "action",
                  "reply", "observation", "well_formed", "action_valid", "reward", "score",
                  "won", "advantage", "value", "critic_value", "state_group_size"]


def _f(col: np.ndarray | None, i: int) -> float | None:
    return None if col is None else float(col[i])


def iteration_groups(paths: list[Path]) -> tuple[int, list[dict[str, Any]]]:
    """(table version, one summary per task group: group, task, type, rollouts, won, steps)."""
    t = read_step_table(paths, ["t", "task_id", "task_type", "won", "done", "state_group_size"])
    groups: dict[int, dict[str, Any]] = {}
    won_traj: set[int] = set()
    for i in range(len(t["group"])):
        g, traj = int(t["group"][i]), int(t["trajectory"][i])
        e = groups.setdefault(g, {"group": g, "task_id": str(t["task_id"][i]) if "task_id" in t
                                  else "?", "task_type": str(t["task_type"][i])
                                  if "task_type" in t else "", "trajectories": set(), "won": 0,
                                  "steps": 0, "shared": 0})
        e["trajectories"].add(traj)
        e["steps"] += 1
        if "state_group_size" in t and t["state_group_size"][i] > 1:
            e["shared"] += 1
        if "won" in t and t["won"][i] and traj not in won_traj:
            won_traj.add(traj)
            e["won"] += 1
    out = []
    for g in sorted(groups):
        e = groups[g]
        e["rollouts"] = len(e.pop("trajectories"))
        out.append(e)
    return t["version"], out


def load_group(paths: list[Path], group: int, gamma: float) -> tuple[int, Group | None]:
    """(table version, one task group's rollouts with their steps in order). The TD error is
    r_t + gamma V(s_{t+1}) - V(s_t) on the saved V (the critic's when saved), 0 after the end."""
    t = read_step_table(paths, _GROUP_COLUMNS)
    rows = np.flatnonzero(t["group"] == group)
    if not len(rows):
        return t["version"], None
    col = t.get
    by_traj: dict[int, list[int]] = {}
    for i in rows:
        by_traj.setdefault(int(t["trajectory"][i]), []).append(int(i))
    v_col = col("critic_value") if col("critic_value") is not None else col("value")
    rollouts = []
    for traj, idx in sorted(by_traj.items()):
        idx.sort(key=lambda i: int(t["t"][i]))
        steps = []
        for k, i in enumerate(idx):
            td = None
            if v_col is not None and col("reward") is not None:
                v_next = float(v_col[idx[k + 1]]) if k + 1 < len(idx) else 0.0
                td = float(t["reward"][i]) + gamma * v_next - float(v_col[i])
            steps.append(Step(
                row=i, trajectory=traj, t=int(t["t"][i]), state_key=str(t["state_key"][i]),
                action=str(t["action"][i]),
                reply=str(t["reply"][i]) if "reply" in t else None,
                observation=str(t["observation"][i]) if "observation" in t else None,
                well_formed=bool(t["well_formed"][i]) if "well_formed" in t else None,
                action_valid=bool(t["action_valid"][i]) if "action_valid" in t else None,
                reward=float(t["reward"][i]) if "reward" in t else 0.0,
                score=float(t["score"][i]), won=bool(t["won"][i]),
                advantage=_f(col("advantage"), i), value=_f(col("value"), i),
                critic_value=_f(col("critic_value"), i), td_error=td,
                group_size=int(t["state_group_size"][i]) if "state_group_size" in t else None))
        last = steps[-1]
        rollouts.append(Rollout(traj, str(t["task_id"][idx[0]]),
                                str(t["task_type"][idx[0]]) if "task_type" in t else "",
                                last.won, last.score, steps))
    first = rollouts[0]
    return t["version"], Group(group, first.task_id, first.task_type, rollouts)


# ---------------------------------------------------------------------------------------------
# Evaluation output (gagpo eval --out): one episode per task, no advantages.

_EVAL_CACHE = _LRU(8)
EVAL_PAGE = 8
"""Episodes shown side by side on one page of an evaluation."""


def eval_episodes(run: Run) -> list[Rollout]:
    """Every episode of ``trajectories.jsonl`` (a torn last line skipped), cached by the file's
    size and time."""
    path = run.path / EVAL_FILE
    stamp = _stamp([path])
    if stamp is None:
        return []
    cached = _EVAL_CACHE.get(stamp)
    if cached is not None:
        return cached
    episodes: dict[int, Rollout] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                r = json.loads(line)
                key = int(r.get("task_index", r["trajectory"]))
                step = Step(
                    row=-1, trajectory=key, t=int(r["t"]), state_key=str(r.get("state_key", "")),
                    action=str(r.get("action", "")), reply=r.get("reply"),
                    observation=r.get("observation"), well_formed=r.get("well_formed"),
                    action_valid=r.get("action_valid"), reward=float(r.get("reward", 0.0)),
                    score=float(r.get("score", 0.0)), won=bool(r.get("won")), advantage=None,
                    value=None, critic_value=None, td_error=None, group_size=None)
            except (ValueError, KeyError, TypeError):
                continue
            e = episodes.setdefault(key, Rollout(key, str(r.get("task_id", "")),
                                                 str(r.get("task_type", "")), False, 0.0, []))
            e.steps.append(step)
            e.won, e.score = step.won, step.score
    out = [episodes[k] for k in sorted(episodes)]
    for e in out:
        e.steps.sort(key=lambda s: s.t)
    _EVAL_CACHE.put(stamp, out)
    return out

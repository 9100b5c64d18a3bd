"""``gagpo compare``: a paired comparison of two evaluations on the same held-out goals.

Two evaluations of one split play the same goals, so the honest question is not whether their
two intervals overlap but how B differs from A goal by goal: the per-goal differences B - A
cancel what makes one goal hard for both. Success and score are compared that way (a paired t
interval and a paired bootstrap over goals, an exact sign test for success); the step rates
(well-formed replies, admissible actions) get intervals that resample whole episodes, since a
policy's steps within one episode are not independent and an interval over steps (the Wilson
interval ``gagpo eval`` prints) is too narrow. Where both sides' records name their actions,
the actions each side took most often are counted too: a policy that learned a safe step (a
page turn in WebShop, a walk in ALFWorld) shows there.

An evaluation's episodes are read from the ``trajectories.jsonl`` that ``gagpo eval --out``
writes (through the viewer's reader of it, :func:`gagpo.viewer.data.eval_episodes`); its
``summary.json`` and a training run's ``evals.json`` keep no per-episode records. The t
distribution and the exact binomial test are scipy's.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats

from gagpo.common.numbers import check_number
from gagpo.evaluate import (
    EPISODES_FILE,
    bootstrap_interval,
    episode_ratio_interval,
    ratio_or_nan,
    wilson,
)
from gagpo.run_folder import read_json, write_json
from gagpo.viewer.data import EVAL_FILE, Run, eval_episodes

RATES = {"well_formed": "well-formed replies", "admissible": "admissible actions"}
ACTIONS_SHOWN = 6
"""How many of the most frequent actions :func:`compare` counts on each side."""

# ---------------------------------------------------------------------------------------------
# Pure statistics


@dataclass(frozen=True)
class PairedT:
    """The mean of paired differences, its 95% t interval and the paired t test's p-value
    (interval and p are None with fewer than two pairs)."""

    mean: float
    lo: float | None
    hi: float | None
    p: float | None


def paired_t(d: npt.ArrayLike) -> PairedT:
    """Mean of the per-goal differences ``d`` with mean -+ t(0.975, n-1) * sd / sqrt(n), sd
    the sample standard deviation; and the two-sided p-value of mean = 0. Identical
    differences give a zero-width interval (p 0, or 1 when they are all 0)."""
    d = np.asarray(d, float)
    if len(d) == 0:
        raise ValueError("paired_t needs at least one difference")
    mean = float(d.mean())
    if len(d) < 2:
        return PairedT(mean, None, None, None)
    se = float(d.std(ddof=1)) / math.sqrt(len(d))
    half = float(stats.t.ppf(0.975, len(d) - 1)) * se
    if se == 0.0:  # identical differences: t is 0 or infinite
        return PairedT(mean, mean, mean, 1.0 if mean == 0.0 else 0.0)
    p = 2.0 * float(stats.t.sf(abs(mean) / se, len(d) - 1))
    return PairedT(mean, mean - half, mean + half, p)


def paired_bootstrap_mean(d: npt.ArrayLike, *, n_boot: int, seed: int) -> tuple[float, float]:
    """95% paired bootstrap interval of the mean per-goal difference: goals resampled."""
    d = np.asarray(d, float)
    return bootstrap_interval(len(d), lambda idx: d[idx].mean(axis=1), n_boot=n_boot, seed=seed)


def paired_ratio_interval(good_a: npt.ArrayLike, steps_a: npt.ArrayLike,
                          good_b: npt.ArrayLike, steps_b: npt.ArrayLike, *, n_boot: int,
                          seed: int) -> tuple[float, float]:
    """95% paired bootstrap interval of rate(B) - rate(A), each a ratio of summed step counts;
    entry i of each array is goal i's counts on that side, and resampling goals keeps a goal's
    episodes of both sides together."""
    ga, sa, gb, sb = (np.asarray(x, float) for x in (good_a, steps_a, good_b, steps_b))
    return bootstrap_interval(
        len(ga), lambda idx: (ratio_or_nan(gb[idx].sum(axis=1), sb[idx].sum(axis=1))
                              - ratio_or_nan(ga[idx].sum(axis=1), sa[idx].sum(axis=1))),
        n_boot=n_boot, seed=seed)


def sign_test(b_better: int, a_better: int) -> float:
    """Exact two-sided sign test (McNemar's exact test for 0/1 outcomes): under no difference
    each discordant goal favours B with probability 1/2, so the p-value is twice the binomial
    tail of the smaller count, capped at 1 (1 when no goal is discordant)."""
    n = b_better + a_better
    if n == 0:
        return 1.0
    return float(stats.binomtest(b_better, n, 0.5, alternative="two-sided").pvalue)


# ---------------------------------------------------------------------------------------------
# Episodes, per goal


@dataclass(frozen=True)
class Episode:
    """What a comparison needs of one episode."""

    goal: str
    task_type: str
    won: bool
    score: float
    steps: int
    well_formed: int
    """Steps whose reply held a parsable action."""
    admissible: int
    """Steps whose action was admissible."""
    actions: tuple[str, ...] | None = None
    """The actions in step order; None where the records do not keep them."""


@dataclass(frozen=True)
class Evaluation:
    """One side of a comparison: its episodes and where they came from."""

    label: str
    source: Path
    episodes: tuple[Episode, ...]
    meta: dict[str, Any]
    """The env, split and policy of the ``summary.json`` beside the episodes, when there."""


@dataclass(frozen=True)
class GoalStats:
    """One goal's episodes on one side: success and score averaged over its plays, step
    counts summed."""

    plays: int
    success: float
    score: float
    steps: int
    well_formed: int
    admissible: int


def per_goal(episodes: Sequence[Episode]) -> dict[str, GoalStats]:
    """Episodes grouped by goal. A goal played several times counts once in a paired
    comparison: its success and score are the means over its plays, its step counts the sums
    (so a step rate stays the ratio of summed counts, as ``gagpo eval`` computes it)."""
    groups: dict[str, list[Episode]] = {}
    for e in episodes:
        groups.setdefault(e.goal, []).append(e)
    return {g: GoalStats(plays=len(es), success=float(np.mean([e.won for e in es])),
                         score=float(np.mean([e.score for e in es])),
                         steps=sum(e.steps for e in es),
                         well_formed=sum(e.well_formed for e in es),
                         admissible=sum(e.admissible for e in es))
            for g, es in groups.items()}


# ---------------------------------------------------------------------------------------------
# The comparison


def _pair(x: Sequence[float | None]) -> list[float | None]:
    return [None if v is None else float(v) for v in x]


def compare(a: Evaluation, b: Evaluation, *, seed: int = 0, n_boot: int = 10_000
            ) -> dict[str, Any]:
    """B against A on their common goals, as a JSON-ready dict.

    ``success`` and ``score``: each side's mean over common goals (a goal's plays averaged
    first, :func:`per_goal`), the mean difference B - A with its paired t interval, paired
    bootstrap interval and t-test p-value; for success also the exact sign test over the goals
    where one side did better. ``well_formed`` and ``admissible``: each side's step rate over
    its episodes of the common goals with an episode-bootstrap interval (and, for reference,
    the Wilson interval over steps that ``gagpo eval`` reports), and the difference with a
    paired bootstrap over goals. Every bootstrap draws from ``seed``.

    Raises:
        ValueError: no goal in common, or a bad ``seed`` or ``n_boot``.
    """
    check_number("seed", seed, ">= 0", integer=True)
    check_number("bootstrap", n_boot, ">= 1", integer=True)
    if n_boot < 100:
        raise ValueError(f"bootstrap must be >= 100 resamples for a 95% interval, not {n_boot}")
    goals_a, goals_b = per_goal(a.episodes), per_goal(b.episodes)
    common = sorted(goals_a.keys() & goals_b.keys())
    if not common:
        raise ValueError(
            f"{a.source} and {b.source} share no goal (A has {len(goals_a)}, e.g. "
            f"{sorted(goals_a)[:3]}; B has {len(goals_b)}, e.g. {sorted(goals_b)[:3]}): a paired "
            "comparison needs two evaluations of the same split")
    ga = [goals_a[g] for g in common]
    gb = [goals_b[g] for g in common]
    result: dict[str, Any] = {
        "labels": [a.label, b.label],
        "sources": [str(a.source), str(b.source)],
        "meta": [a.meta, b.meta],
        "goals": {"common": len(common), "only_a": len(goals_a.keys() - goals_b.keys()),
                  "only_b": len(goals_b.keys() - goals_a.keys()),
                  "repeated_a": sum(s.plays > 1 for s in ga),
                  "repeated_b": sum(s.plays > 1 for s in gb)},
        "episodes": [sum(s.plays for s in ga), sum(s.plays for s in gb)],
        "seed": seed, "bootstrap": n_boot,
    }
    for key in ("success", "score"):
        xa = np.array([getattr(s, key) for s in ga])
        xb = np.array([getattr(s, key) for s in gb])
        d = xb - xa
        t = paired_t(d)
        result[key] = {"a": float(xa.mean()), "b": float(xb.mean()), "diff": t.mean,
                       "t_ci95": _pair((t.lo, t.hi)), "t_p": t.p,
                       "bootstrap_ci95": _pair(paired_bootstrap_mean(d, n_boot=n_boot,
                                                                     seed=seed))}
        if key == "success":
            b_better, a_better = int((d > 0).sum()), int((d < 0).sum())
            result[key]["sign_test"] = {"b_better": b_better, "a_better": a_better,
                                        "ties": len(d) - b_better - a_better,
                                        "p": sign_test(b_better, a_better)}
    common_set = set(common)
    for key in RATES:
        sides = []
        for ev in (a, b):
            eps = [e for e in ev.episodes if e.goal in common_set]
            good = np.array([getattr(e, key) for e in eps], float)
            steps = np.array([e.steps for e in eps], float)
            sides.append({
                "rate": float(good.sum() / steps.sum()), "steps": int(steps.sum()),
                "ci95": _pair(episode_ratio_interval(good, steps, n_boot=n_boot, seed=seed)),
                "wilson_over_steps_ci95": _pair(wilson(int(good.sum()), int(steps.sum()))),
            })
        counts = [np.array([getattr(s, name) for s in side], float)
                  for side in (ga, gb) for name in (key, "steps")]
        result[key] = {"a": sides[0], "b": sides[1], "diff": sides[1]["rate"] - sides[0]["rate"],
                       "bootstrap_ci95": _pair(paired_ratio_interval(*counts, n_boot=n_boot,
                                                                     seed=seed))}
    result["actions"] = most_frequent_actions(
        [[e for e in ev.episodes if e.goal in common_set] for ev in (a, b)])
    return result


def most_frequent_actions(sides: Sequence[Sequence[Episode]], shown: int = ACTIONS_SHOWN
                          ) -> dict[str, Any] | None:
    """The ``shown`` actions with the largest share of steps, the sides' shares summed (ties
    by name), and how many steps each side spent on each; None when an episode of either side
    does not name its actions."""
    if any(e.actions is None for side in sides for e in side):
        return None
    counts = [Counter(act for e in side for act in e.actions) for side in sides]
    steps = [sum(len(e.actions) for e in side) for side in sides]
    share = Counter()
    for count, n in zip(counts, steps, strict=True):
        for act, c in count.items():  # a side with no steps has no actions: n > 0 here
            share[act] += c / n
    top = sorted(share, key=lambda act: (-share[act], act))[:shown]
    return {"steps": steps, "top": [{"action": act, "counts": [c[act] for c in counts]}
                                    for act in top]}


def _pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}"


def _interval(ci: Sequence[float | None], signed: bool = False) -> str:
    return f"[{_pct(ci[0], signed)}, {_pct(ci[1], signed)}]"


def _p(p: float | None) -> str:
    if p is None:
        return "p n/a"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def format_markdown(result: dict[str, Any]) -> str:
    """A markdown table of :func:`compare`'s result that a README can paste, with one line
    above it saying what was compared and how. Success and the rates in %, score x100."""
    la, lb = result["labels"]
    g = result["goals"]
    s, sc = result["success"], result["score"]
    st = s["sign_test"]
    left_out = (f"; {g['only_a']} goals only in A and {g['only_b']} only in B left out"
                if g["only_a"] or g["only_b"] else "")
    lines = [
        f"A = {la}, B = {lb}: {g['common']} common goals ({result['episodes'][0]} and "
        f"{result['episodes'][1]} episodes{left_out}). B - A: mean of per-goal differences, "
        f"95% paired t interval, then paired bootstrap over goals ({result['bootstrap']} "
        f"resamples, seed {result['seed']}); step rates' A and B intervals resample whole "
        "episodes.",
        "",
        f"| metric | A: {la} | B: {lb} | B - A [95% CI] | p or note |",
        "|---|---|---|---|---|",
    ]
    for name, row, note in (
        ("success %", s, f"{_p(st['p'])} (exact sign test: B better on {st['b_better']} goals, "
                         f"A on {st['a_better']})"),
        ("score x100", sc, f"{_p(sc['t_p'])} (paired t test)"),
    ):
        lines.append(f"| {name} | {_pct(row['a'])} | {_pct(row['b'])} | "
                     f"{_pct(row['diff'], True)} {_interval(row['t_ci95'], True)}, bootstrap "
                     f"{_interval(row['bootstrap_ci95'], True)} | {note} |")
    for key, what in RATES.items():
        r = result[key]
        lines.append(f"| {what} % | {_pct(r['a']['rate'])} {_interval(r['a']['ci95'])} | "
                     f"{_pct(r['b']['rate'])} {_interval(r['b']['ci95'])} | "
                     f"{_pct(r['diff'], True)} {_interval(r['bootstrap_ci95'], True)} | "
                     f"bootstrap over goals; {r['a']['steps']} and {r['b']['steps']} steps |")
    actions = result.get("actions")
    if actions:
        steps = actions["steps"]
        lines += ["", f"The actions taken most often (steps, and their share of each side's "
                      f"{steps[0]} and {steps[1]} steps):", "",
                  f"| action | A: {la} | B: {lb} |", "|---|---|---|"]
        for row in actions["top"]:
            cells = [f"{c} ({_pct(c / n)}%)" for c, n in zip(row["counts"], steps, strict=True)]
            name = row["action"].replace("|", "\\|").replace("`", "'")
            lines.append(f"| `{name}` | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Reading evaluations and the command


def _no_records(path: Path) -> ValueError:
    value = read_json(path)
    if isinstance(value, dict) and "by_type" in value:
        what = "it is a gagpo eval summary: rates per task type only"
    elif isinstance(value, dict) and any(isinstance(v, dict) and "all" in v
                                         for v in value.values()):
        what = ("it is a training run's held-out summaries; the trainer keeps no episodes of "
                "them: evaluate its checkpoint with gagpo export, then gagpo eval --out")
    else:
        what = "it is not an evaluation gagpo writes"
    return ValueError(f"{path} has no per-episode records ({what}); gagpo compare pairs "
                      f"episodes by goal and reads the {EVAL_FILE} that gagpo eval --out DIR "
                      "writes beside its summary.json")


def episodes_file(path: Path) -> Path:
    """The per-episode records that ``path`` names: an ``episodes.jsonl`` or a
    ``trajectories.jsonl``, the folder holding them (``episodes.jsonl`` first: it is the small
    one), or the ``summary.json`` beside them.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: ``path`` holds no per-episode records (the message says what it is).
    """
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    folder = path if path.is_dir() else path.parent
    if path.is_dir() or path.name == "summary.json":
        for name in (EPISODES_FILE, EVAL_FILE):
            if (folder / name).is_file():
                return folder / name
    if path.is_dir():
        for name in ("summary.json", "evals.json"):
            if (path / name).is_file():
                raise _no_records(path / name)
        raise ValueError(f"{path} holds no evaluation: gagpo compare reads the {EPISODES_FILE} "
                         f"or {EVAL_FILE} that gagpo eval --out DIR writes")
    if path.name in (EPISODES_FILE, EVAL_FILE):
        return path
    raise _no_records(path)


def _episode_records(source: Path) -> list[Episode]:
    """The episodes of an ``episodes.jsonl``. A torn last line (an evaluation stopped while
    writing it) is skipped; a bad line before it is an error, not an episode quietly lost.

    Raises:
        ValueError: a line other than the last is not an episode record.
    """
    lines = source.read_text(encoding="utf-8").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
            n = int(e["length"])
            actions = e.get("actions")
            if actions is not None:
                if not isinstance(actions, list):
                    raise ValueError(f"actions is a {type(actions).__name__}, not a list")
                actions = tuple(str(act) for act in actions)
                if len(actions) != n:
                    raise ValueError(f"{len(actions)} actions for {n} steps")
            out.append(Episode(goal=str(e["task_id"]), task_type=str(e.get("task_type", "")),
                               won=bool(e["won"]), score=float(e["score"]), steps=n,
                               well_formed=n - int(e["malformed_replies"]),
                               admissible=n - int(e["invalid_actions"]), actions=actions))
        except (ValueError, KeyError, TypeError) as err:
            if number == len(lines):
                break
            raise ValueError(f"{source}, line {number}: not an episode record "
                             f"({type(err).__name__}: {err})") from None
    return out


def load_evaluation(path: str | Path, label: str | None = None) -> Evaluation:
    """An evaluation's episodes (:func:`episodes_file` says which paths name one), labelled
    ``label`` or its folder's name.

    Raises:
        FileNotFoundError, ValueError: as :func:`episodes_file`; a file without episodes, or
            whose steps lack the well-formed and admissible flags.
    """
    source = episodes_file(Path(path))
    if source.name == EPISODES_FILE:
        episodes = _episode_records(source)
        rollouts = []
        if not episodes:
            raise ValueError(f"{source} holds no episode records")
    else:
        rollouts = eval_episodes(Run(source.parent.name, source.parent, "eval"))
        episodes = []
        if not rollouts:
            raise ValueError(f"{source} holds no episode records")
    for r in rollouts:
        if any(s.well_formed is None or s.action_valid is None for s in r.steps):
            raise ValueError(f"{source}: episode {r.trajectory}'s steps lack the well_formed "
                             "or action_valid flags")
        episodes.append(Episode(goal=r.task_id, task_type=r.task_type, won=r.won,
                                score=r.score, steps=len(r.steps),
                                well_formed=sum(bool(s.well_formed) for s in r.steps),
                                admissible=sum(bool(s.action_valid) for s in r.steps),
                                actions=tuple(s.action for s in r.steps)))
    summary = read_json(source.parent / "summary.json")
    meta = {}
    if isinstance(summary, dict):
        meta = {"env": summary.get("env"), "split": summary.get("split"),
                "policy": (summary.get("policy") or {}).get("name")}
    return Evaluation(label or source.parent.resolve().name, source, tuple(episodes), meta)


def pooled(label: str, evaluations: Sequence[Evaluation]) -> Evaluation:
    """Several evaluations of the same goals (a recipe's seeds, say) as one side of a
    comparison: their episodes together, so that :func:`compare` averages each goal's plays
    (one per evaluation) before it pairs the goals."""
    if not evaluations:
        raise ValueError("no evaluations to pool")
    where = {(ev.meta.get("env"), ev.meta.get("split")) for ev in evaluations if ev.meta}
    if len(where) > 1:
        raise ValueError("cannot pool evaluations of different environments or splits "
                         f"({', '.join(sorted(f'{env} {split}' for env, split in where))}): a "
                         "side's evaluations must play the same goals")
    episodes = tuple(e for ev in evaluations for e in ev.episodes)
    # Where they all lie (their common folder; absolute if some were given so), and the
    # first's env and split.
    try:
        source = Path(os.path.commonpath([ev.source for ev in evaluations]))
    except ValueError:  # relative and absolute paths mixed
        source = Path(os.path.commonpath([ev.source.resolve() for ev in evaluations]))
    return Evaluation(label, source, episodes, next((ev.meta for ev in evaluations
                                                     if ev.meta), {}))


def load_side(paths: str | Path, label: str | None = None) -> Evaluation:
    """One side of ``gagpo compare``: an evaluation (:func:`load_evaluation`), or several
    given as ``PATH,PATH,...`` pooled (:func:`pooled`), labelled ``label`` or their folders'
    names joined by ``+``. A path that exists as given is one evaluation, commas and all."""
    text = str(paths)
    parts = [text] if Path(text).exists() else [p.strip() for p in text.split(",")]
    if not all(parts):
        raise ValueError(f"an empty path in {text!r}: give PATH or PATH,PATH,...")
    if len(parts) == 1:
        return load_evaluation(parts[0], label)
    evaluations = [load_evaluation(p) for p in parts]
    return pooled(label or "+".join(ev.label for ev in evaluations), evaluations)


def run_compare(path_a: str | Path, path_b: str | Path, *, out: str | Path | None = None,
                seed: int = 0, n_boot: int = 10_000, labels: Sequence[str] | None = None
                ) -> dict[str, Any]:
    """``gagpo compare``: load both sides (each an evaluation or several pooled:
    :func:`load_side`), compare, print the notes and the markdown table, write the result as
    JSON to ``out`` when given; returns the result."""
    if labels is not None and (len(labels) != 2 or not all(x.strip() for x in labels)):
        raise ValueError(f"--labels takes two names, A,B, not {','.join(labels)!r}")
    la, lb = (None, None) if labels is None else (labels[0].strip(), labels[1].strip())
    a, b = load_side(path_a, la), load_side(path_b, lb)
    if la is None and a.label == b.label:
        a = Evaluation("A", a.source, a.episodes, a.meta)
        b = Evaluation("B", b.source, b.episodes, b.meta)
    result = compare(a, b, seed=seed, n_boot=n_boot)
    g = result["goals"]
    if g["only_a"] or g["only_b"]:
        print(f"note: {g['only_a']} goals only in A and {g['only_b']} only in B are left out: "
              f"compared on the {g['common']} common goals")
    for side, key in (("A", "repeated_a"), ("B", "repeated_b")):
        if g[key]:
            print(f"note: {g[key]} goals were played several times in {side}: their episodes "
                  "are averaged per goal")
    where = [(m.get("env"), m.get("split")) for m in (a.meta, b.meta)]
    if a.meta and b.meta and where[0] != where[1]:
        print(f"note: A is {a.meta.get('env')} {a.meta.get('split')}, B is "
              f"{b.meta.get('env')} {b.meta.get('split')}")
    print(format_markdown(result))
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_json(Path(out), result)
    return result

"""Credit assignment: GAGPO, GiGPO, GRPO and RLOO side by side, same policy, same budget.

The estimators do not care what the policy is, so the policy here is the smallest one that can
learn: a tabular softmax over the admissible actions, one logit per (task, state key, action),
all 0 at the start, trained by plain policy gradient on each estimator's advantages A_t (one
update per iteration, on the iteration's own samples):

    theta[s, b] += lr / G * sum_{rows t with s_t = s} A_t * (1[b = a_t] - pi(b | s_t))

An iteration resets N tasks drawn from a fixed pool of training tasks, G copies each
(:class:`gagpo.envs.vector.GroupVectorEnv`), samples every action at temperature 1 and rewards
10 x won at the last step (the papers' outcome reward). WebShop's ``search[<query>]``
template is played as ``search[<instruction>]``. Every method gets the same budget (training
episodes = iterations x N x G) and the same seeds. Success is that of the sampled policy on the
training tasks, read off the training rollouts themselves (no extra samples), averaged over
windows of ``window`` iterations. Also measured: the share of steps whose state is shared in its
group, with steps keyed on ``info["state_key"]`` vs on the observation text (GiGPO's key).

ALFWorld episodes are long (up to 50 steps; a uniform policy wins ~3%), so its pool is the 2
train games with the shortest expert plans, all played every iteration. Its default run (6
iterations) is too short to learn; ``--iterations 24 --window 3`` learns, at about 4 s of CPU
per run on the native engine. ``--iterations`` etc. apply to every env.

    python -m benchmarks.credit_assignment [--env WebShop-v0|ALFWorld-v0|both] [--quick]

writes ``benchmarks/results/credit_assignment.{png,md}`` and prints the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import gagpo.envs  # noqa: F401  (registers the environments)
from gagpo.advantages import compute_advantages, state_groups
from gagpo.envs.vector import GroupVectorEnv

METHODS = ("gagpo", "gigpo", "grpo", "rloo")
ENVS = ("WebShop-v0", "ALFWorld-v0")
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Args:
    env: str = "both"
    """WebShop-v0, ALFWorld-v0 or both"""
    seeds: int = 3
    """seeds per method (the same seeds for every method)"""
    iterations: int | None = None
    """training iterations (env default: ENV_DEFAULTS); budget = iterations x N x G episodes"""
    n_tasks: int | None = None
    """tasks N (groups) per iteration, drawn from the pool without replacement"""
    pool: int | None = None
    """number of training tasks"""
    window: int | None = None
    """iterations per point of the success curve"""
    group_size: int = 8
    """rollouts G of each task per iteration"""
    lr: float = 10.0
    """policy-gradient step size, the same for every method and env. Tuned once on WebShop
    (--quick, 2 seeds, lr in 0.1..100): the smallest lr where the methods' mean success
    plateaus"""
    methods: str = ",".join(METHODS)
    """comma-separated estimators to run (default: all four)"""
    lrs: str = ""
    """comma-separated step sizes to sweep instead (e.g. 3,10,30): every method runs at each,
    and is reported at its own best (highest whole-run success). The estimators' advantages
    differ in scale (GiGPO adds two normalised terms), which plain policy gradient turns into
    a different effective step size; a per-method best removes that from the comparison"""
    gamma: float = 0.95
    """discount of G_t (verl-agent's)"""
    lam: float = 0.95
    """GAGPO's GAE lambda (gagpo.advantages.DEFAULT_LAM)"""
    win_reward: float = 10.0
    """reward of a won episode, given at its last step"""
    backend: str = "inprocess"
    """GroupVectorEnv backend (inprocess, process, ray)"""
    out: Path = RESULTS
    """folder for the PNG and the markdown table"""


ENV_DEFAULTS: dict[str, dict[str, int]] = {
    "WebShop-v0": {"iterations": 120, "n_tasks": 8, "pool": 32, "window": 10},
    "ALFWorld-v0": {"iterations": 6, "n_tasks": 2, "pool": 2, "window": 1},
}
QUICK: dict[str, dict[str, int]] = {
    "WebShop-v0": {"iterations": 40, "n_tasks": 8, "pool": 16, "window": 5},
    "ALFWorld-v0": {"iterations": 1, "n_tasks": 2, "pool": 2, "window": 1},
}


# ---------------------------------------------------------------------------------------------
# The policy: one logit per (task, state key, action), softmax over the admissible actions.

State = tuple[str, str]  # (task_id, state_key)


class TabularSoftmax:
    """pi(a | s) = softmax over the admissible actions of theta[s][a] (0 for unseen ones)."""

    def __init__(self) -> None:
        self.theta: dict[State, dict[str, float]] = {}

    def probs(self, state: State, actions: list[str]) -> np.ndarray:
        logits = self.theta.get(state, {})
        z = np.array([logits.get(a, 0.0) for a in actions])
        p = np.exp(z - z.max())
        return p / p.sum()

    def update(self, states: list[State], choices: list[list[str]], taken: list[int],
               advantages: np.ndarray, step_size: float) -> None:
        """theta[s] += step_size * sum_t A_t * grad log pi(a_t | s_t), at the rollout's theta:
        d log pi(a | s) / d theta[s][b] = 1[b = a] - pi(b | s)."""
        grads = []
        for s, actions, a, adv in zip(states, choices, taken, advantages, strict=True):
            g = -adv * self.probs(s, actions)
            g[a] += adv
            grads.append((s, actions, g))
        for s, actions, g in grads:
            logits = self.theta.setdefault(s, {})
            for b, gb in zip(actions, g, strict=True):
                logits[b] = logits.get(b, 0.0) + step_size * gb


def admissible(info: dict[str, Any]) -> list[str]:
    """The state's admissible actions, WebShop's search template filled with the instruction."""
    return [f"search[{info['instruction']}]" if a == "search[<query>]" else a
            for a in info["admissible_actions"]]


# ---------------------------------------------------------------------------------------------
# Rollouts: one episode per env of the vector env, recorded as a step table.


def rollout(vec: GroupVectorEnv, policy: TabularSoftmax, tasks: list, rng: np.random.Generator,
            win_reward: float) -> dict[str, Any]:
    """Play tasks[i] in group i (G copies each); the step table and each episode's outcome."""
    obs, infos = vec.reset(tasks)
    n = vec.num_envs
    t = np.zeros(n, dtype=int)
    won = np.zeros(n, dtype=bool)
    names = ("group", "trajectory", "step", "key", "obs", "state", "choices", "taken", "reward")
    table: dict[str, list] = {k: [] for k in names}
    while vec.live.any():
        actions: list[str | None] = [None] * n
        rows = {}
        for i in np.flatnonzero(vec.live):
            state = (infos[i]["task_id"], infos[i]["state_key"])
            choices = admissible(infos[i])
            a = int(rng.choice(len(choices), p=policy.probs(state, choices)))
            actions[i] = choices[a]
            rows[i] = (i // vec.group_size, i, t[i], state[1], obs[i], state, choices, a)
        new_obs, _, terminated, truncated, new_infos = vec.step(actions)
        for i, row in rows.items():
            won[i] = (terminated[i] or truncated[i]) and bool(new_infos[i].get("won", False))
            for k, v in zip(names, (*row, win_reward * won[i]), strict=True):
                table[k].append(v)
            obs[i], infos[i] = new_obs[i], new_infos[i]
            t[i] += 1
    return {**table, "won": won}


# ---------------------------------------------------------------------------------------------
# One training run, then all of them.


def train(env_id: str, method: str, seed: int, args: Args, cfg: dict[str, int],
          pool: list) -> dict[str, Any]:
    """Train a fresh tabular policy on ``method``'s advantages; its success curve and stats."""
    rng = np.random.default_rng(seed)
    policy = TabularSoftmax()
    won, shared_key, shared_obs, steps = [], [], [], []
    with GroupVectorEnv(env_id, cfg["n_tasks"], args.group_size, backend=args.backend) as vec:
        for _ in range(cfg["iterations"]):
            if cfg["n_tasks"] == len(pool):  # every task every iteration, each env keeps its own
                tasks = list(pool)
            else:
                tasks = [pool[j] for j in rng.choice(len(pool), cfg["n_tasks"], replace=False)]
            batch = rollout(vec, policy, tasks, rng, args.win_reward)
            adv = compute_advantages(
                method, group=batch["group"], trajectory=batch["trajectory"],
                step=batch["step"], key=batch["key"], reward=batch["reward"],
                gamma=args.gamma, lam=args.lam)
            policy.update(batch["state"], batch["choices"], batch["taken"], adv,
                          args.lr / args.group_size)
            won.append(batch["won"].mean())
            steps.append(len(batch["reward"]))
            shared_key.append(state_groups(batch["group"], batch["key"])[2])
            shared_obs.append(state_groups(batch["group"], batch["obs"])[2])
    w = cfg["window"]
    n_points = len(won) // w
    episodes = vec.num_envs * w * np.arange(1, n_points + 1)
    success = np.array(won[: n_points * w]).reshape(n_points, w).mean(axis=1)
    return {"env": env_id, "method": method, "seed": seed, "lr": args.lr, "episodes": episodes,
            "success": success, "won": np.array(won), "steps": np.array(steps),
            "episodes_per_iter": vec.num_envs, "group_size": args.group_size,
            "shared_key": np.array(shared_key), "shared_obs": np.array(shared_obs)}


def train_pool(env_id: str, size: int) -> list:
    """WebShop: the first ``size`` train goals. ALFWorld: the ``size`` train games with the
    shortest expert plans (the only ones a uniform policy wins often enough to start from)."""
    env = gym.make(env_id)
    try:
        base = env.unwrapped
        tasks = list(base.split_tasks("train"))
        if hasattr(base, "games"):
            games = base.games("train")
            tasks.sort(key=lambda i: (len(games[i].walkthrough()), i))
        return tasks[:size]
    finally:
        env.close()


def available(env_id: str) -> str | None:
    """None if ``gym.make(env_id)`` works, else why not."""
    try:
        gym.make(env_id).close()
    except Exception as e:  # any failure means: skip this env, and say why
        return f"{type(e).__name__}: {e}"
    return None


# ---------------------------------------------------------------------------------------------
# Reporting: a markdown table and a PNG of success vs training episodes (mean +- s.e.).


def _mean_se(x: Any) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=float)
    se = x.std(axis=0, ddof=1) / math.sqrt(len(x)) if len(x) > 1 else np.zeros(x.shape[1:])
    return x.mean(axis=0), se


def _pct(x: Any) -> str:
    m, s = _mean_se(x)
    return f"{100 * m:.1f} ± {100 * s:.1f}"


def table(runs: list[dict]) -> str:
    """Per (env, method): success over the first, middle and last quarter of the budget, the
    mean over the whole run (area under the curve), episode length, env steps."""
    lines = ["| env | method | success, 1st quarter | 2nd-3rd quarter | last quarter "
             "| whole run (AUC) | steps/episode, last quarter | env steps |",
             "|---|---|---|---|---|---|---|---|"]
    for env_id in dict.fromkeys(r["env"] for r in runs):
        for method in METHODS:
            rs = [r for r in runs if r["env"] == env_id and r["method"] == method]
            if not rs:
                continue
            won = np.stack([r["won"] for r in rs])  # seeds x iterations
            q = max(1, won.shape[1] // 4)
            length = [r["steps"][-q:].sum() / (q * r["episodes_per_iter"]) for r in rs]
            lines.append(
                f"| {env_id} | {method} (lr {rs[0]['lr']:g}) | {_pct(won[:, :q].mean(1))} "
                f"| {_pct(won[:, q:-q].mean(1)) if won.shape[1] > 2 * q else '-'} "
                f"| {_pct(won[:, -q:].mean(1))} | {_pct(won.mean(1))} "
                f"| {np.mean(length):.2f} | {np.mean([r['steps'].sum() for r in rs]):,.0f} |")
    lines += ["", "Share of steps whose state is shared in its group (step group > 1 row), "
              "keyed on state_key vs on the observation text:", "",
              "| env | key | first iteration (uniform policy) | last quarter |",
              "|---|---|---|---|"]
    for env_id in dict.fromkeys(r["env"] for r in runs):
        rs = [r for r in runs if r["env"] == env_id]
        q = max(1, len(rs[0]["won"]) // 4)
        for name, col in (("state_key", "shared_key"), ("observation", "shared_obs")):
            first = np.mean([r[col][0] for r in rs])
            last = np.mean([r[col][-q:].mean() for r in rs])
            lines.append(f"| {env_id} | {name} | {100 * first:.1f}% | {100 * last:.1f}% |")
    return "\n".join(lines)


def sweep_table(runs: list[dict]) -> str:
    """Whole-run success of every (env, method, lr), mean ± s.e. over seeds."""
    lrs = sorted({r["lr"] for r in runs})
    lines = ["Learning-rate sweep, whole-run success (AUC):", "",
             "| env | method | " + " | ".join(f"lr {lr:g}" for lr in lrs) + " |",
             "|---|---|" + "---|" * len(lrs)]
    for env_id in dict.fromkeys(r["env"] for r in runs):
        for method in METHODS:
            cells = []
            for lr in lrs:
                rs = [r for r in runs if (r["env"], r["method"], r["lr"]) == (env_id, method, lr)]
                cells.append(_pct([r["won"].mean() for r in rs]) if rs else "-")
            lines.append(f"| {env_id} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best_lr_runs(runs: list[dict]) -> list[dict]:
    """Each (env, method)'s runs at its lr of highest mean whole-run success."""
    best: list[dict] = []
    for key in dict.fromkeys((r["env"], r["method"]) for r in runs):
        mine = [r for r in runs if (r["env"], r["method"]) == key]
        lr = max(sorted({r["lr"] for r in mine}),
                 key=lambda x: np.mean([r["won"].mean() for r in mine if r["lr"] == x]))
        best += [r for r in mine if r["lr"] == lr]
    return best


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    env_ids = list(dict.fromkeys(r["env"] for r in runs))
    fig, axes = plt.subplots(1, len(env_ids), figsize=(6 * len(env_ids), 4.2), squeeze=False)
    for ax, env_id in zip(axes[0], env_ids, strict=True):
        for method in METHODS:
            rs = [r for r in runs if r["env"] == env_id and r["method"] == method]
            if not rs:
                continue
            m, s = _mean_se(np.stack([r["success"] for r in rs]))
            x = rs[0]["episodes"]
            label = f"{method}, lr {rs[0]['lr']:g} ({len(rs)} seeds)"
            ax.plot(x, 100 * m, marker=".", label=label)
            ax.fill_between(x, 100 * (m - s), 100 * (m + s), alpha=0.2)
        ax.set_title(f"{env_id}: tabular softmax policy, G = {rs[0]['group_size']}")
        ax.set_xlabel("training episodes")
        ax.set_ylabel("success of the training rollouts (%)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> tuple[Args, bool]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for f in dataclasses.fields(Args):
        kind = int if f.type in ("int | None", "int") else type(f.default)
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=None,
                            help=f"(default: {f.default})")
    parser.add_argument("--quick", action="store_true", help="a short run, under 2 minutes")
    ns = vars(parser.parse_args(argv))
    quick = ns.pop("quick")
    return Args(**{k: v for k, v in ns.items() if v is not None}), quick


def main(argv: list[str] | None = None) -> list[dict]:
    args, quick = parse_args(argv)
    lrs = [float(x) for x in args.lrs.split(",") if x.strip()] or [args.lr]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if unknown := set(methods) - set(METHODS):
        raise SystemExit(f"unknown methods {sorted(unknown)}; known: {', '.join(METHODS)}")
    env_ids = list(ENVS) if args.env == "both" else [args.env]
    runs: list[dict] = []
    notes: list[str] = []
    for env_id in env_ids:
        reason = available(env_id)
        if reason is not None:
            notes.append(f"{env_id} skipped: gym.make({env_id!r}) failed ({reason})")
            print(notes[-1])
            continue
        cfg = {**(QUICK if quick else ENV_DEFAULTS)[env_id],
               **{k: getattr(args, k) for k in ("iterations", "n_tasks", "pool", "window")
                  if getattr(args, k) is not None}}
        pool = train_pool(env_id, cfg["pool"])
        cfg["n_tasks"] = min(cfg["n_tasks"], len(pool))
        budget = cfg["iterations"] * cfg["n_tasks"] * args.group_size
        notes.append(f"{env_id}: {budget:,} training episodes per run ({cfg['iterations']} "
                     f"iterations x N = {cfg['n_tasks']} tasks x G = {args.group_size}), "
                     f"pool of {len(pool)} train tasks, success window {cfg['window']} it.")
        print(notes[-1], flush=True)
        for method in methods:
            for lr, seed in [(lr, seed) for lr in lrs for seed in range(args.seeds)]:
                t = time.perf_counter()
                run = train(env_id, method, seed, dataclasses.replace(args, lr=lr), cfg, pool)
                runs.append(run)
                print(f"  {method:6s} lr {lr:g} seed {seed}: success "
                      f"{100 * run['won'][0]:.1f}% -> "
                      f"{100 * run['won'][-1]:.1f}% (first -> last iteration), "
                      f"{run['steps'].sum():,} env steps, {time.perf_counter() - t:.1f}s",
                      flush=True)
    if not runs:
        print("nothing ran")
        return runs
    sweep = ""
    if len(lrs) > 1:
        sweep = "\n\n" + sweep_table(runs)
        runs = best_lr_runs(runs)
    lr_text = f"lr = {args.lr}" if len(lrs) == 1 else (
        "lr per method: the best of " + ", ".join(f"{lr:g}" for lr in lrs)
        + " (whole-run success)")
    header = "\n".join(
        [f"Tabular softmax policy, {lr_text}, gamma = {args.gamma}, lam = {args.lam}, "
         f"norm = mean_std, reward {args.win_reward:g} x won, {args.seeds} seeds per method "
         "(mean ± s.e. over seeds). Success: the sampled (temperature 1) training rollouts."]
        + [f"- {n}" for n in notes]) + "\n\n"
    text = header + table(runs) + sweep
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "credit_assignment.md").write_text(text + "\n", encoding="utf-8")
    plot(runs, args.out / "credit_assignment.png")
    print(text)
    print(f"wrote {args.out / 'credit_assignment.png'} and {args.out / 'credit_assignment.md'}")
    return runs


if __name__ == "__main__":
    main()

"""Evaluation: ``gagpo eval`` (any policy) and the trainer's held-out evaluation
(:func:`evaluate_model`), many episodes summarised as a table a reader can trust.

Success rate and score per task type with 95% confidence intervals (Wilson for rates, the
normal approximation for mean scores), printed as a table and written as JSON; every
trajectory's steps as JSONL, and one line per episode (:data:`EPISODES_FILE`).
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from gagpo.agents.policies.factory import (
    PolicySpec,
    build_policy,
    env_kwargs_for,
    runs_transformers,
)
from gagpo.common.numbers import check_number

if TYPE_CHECKING:
    from gagpo.agents.rollout import StepTable
    from gagpo.distributed import Compute
    from gagpo.envs.vector import GroupVectorEnv

Z95 = 1.959964
EPISODES_FILE = "episodes.jsonl"
"""One line per episode (task, length, return, score, won, malformed replies, invalid actions,
the actions in order: :meth:`StepTable.episodes`), written beside ``trajectories.jsonl``: small
enough to commit behind a table, and what ``gagpo compare`` pairs."""


def _json_value(v: Any) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True


def wilson(successes: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a success rate (well-behaved at 0 and 1)."""
    if n == 0:
        return 0.0, 0.0
    p = successes / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    # At 0 or n successes one end is exactly 0 or 1, which the formula reaches only up to
    # rounding; between them both ends lie strictly inside (0, 1).
    lo = 0.0 if successes == 0 else centre - half
    hi = 1.0 if successes == n else centre + half
    return lo, hi


def mean_interval(x: np.ndarray) -> tuple[float, float, float]:
    """Mean score and its 95% normal-approximation interval, clipped to [0, 1]: every env's
    score is in [0, 1] (``TextInfo.score``), and so is their mean, but the approximation's
    interval overshoots near the ends (a 5-episode row of ``gagpo eval``: [0.514, 1.046])."""
    if len(x) == 0:
        return 0.0, 0.0, 0.0
    m = float(np.mean(x))
    half = Z95 * float(np.std(x, ddof=1)) / math.sqrt(len(x)) if len(x) > 1 else 0.0
    return m, max(0.0, m - half), min(1.0, m + half)


def bootstrap_interval(n: int, statistic: Callable[[np.ndarray], np.ndarray], *,
                       n_boot: int, seed: int) -> tuple[float, float]:
    """95% percentile interval of ``statistic`` over ``n_boot`` resamples (with replacement)
    of ``n`` units. ``statistic`` maps an (k, n) array of unit indices, one resample a row, to
    k values. The resamples come from ``numpy.random.default_rng(seed)``, drawn in chunks of
    bounded memory: one seed, one interval."""
    if n < 1:
        raise ValueError("a bootstrap needs at least one unit")
    rng = np.random.default_rng(seed)
    rows = max(1, 2_000_000 // n)
    values = []
    for start in range(0, n_boot, rows):
        idx = rng.integers(0, n, size=(min(rows, n_boot - start), n))
        values.append(np.asarray(statistic(idx), float))
    lo, hi = np.nanpercentile(np.concatenate(values), [2.5, 97.5])
    return float(lo), float(hi)


def ratio_or_nan(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den`` elementwise, NaN where ``den`` is 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def episode_ratio_interval(good: npt.ArrayLike, steps: npt.ArrayLike, *, n_boot: int,
                           seed: int) -> tuple[float, float]:
    """95% interval of a step rate sum(good) / sum(steps) resampling whole episodes (one
    entry of ``good`` and ``steps`` per episode): steps of one episode move together, so the
    episode, not the step, is the independent unit."""
    good, steps = np.asarray(good, float), np.asarray(steps, float)
    return bootstrap_interval(
        len(good), lambda idx: ratio_or_nan(good[idx].sum(axis=1), steps[idx].sum(axis=1)),
        n_boot=n_boot, seed=seed)


def summarise(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Per task type and overall: episodes, success rate and mean score with 95% intervals,
    mean length, and over the steps the shares of well-formed replies and of admissible
    actions, their 95% intervals resampling whole episodes (:func:`episode_ratio_interval`,
    10,000 resamples, seed 0): the steps of one episode are not independent, and an interval
    that counted them as such would be too narrow."""
    by_type: dict[str, list[dict]] = defaultdict(list)
    for e in episodes:
        by_type[e["task_type"]].append(e)
    rows = {}
    for name, group in [*sorted(by_type.items()), ("all", episodes)]:
        won = sum(bool(e["won"]) for e in group)
        lo, hi = wilson(won, len(group))
        score, s_lo, s_hi = mean_interval(np.asarray([e["score"] for e in group], float))
        rows[name] = {
            "episodes": len(group),
            "success": won / max(1, len(group)), "success_ci95": [lo, hi],
            "score": score, "score_ci95": [s_lo, s_hi],
            "mean_length": float(np.mean([e["length"] for e in group])) if group else 0.0,
            "failed": sum(bool(e["failed"]) for e in group),
        }
        lengths = np.asarray([e["length"] for e in group], float)
        for key, bad in (("well_formed", "malformed_replies"), ("admissible", "invalid_actions")):
            good = lengths - np.asarray([e[bad] for e in group], float)
            rows[name][key] = float(good.sum()) / max(1.0, float(lengths.sum()))
            rows[name][f"{key}_ci95"] = (
                list(episode_ratio_interval(good, lengths, n_boot=10_000, seed=0))
                if lengths.sum() > 0 else [0.0, 0.0])
    return rows


def format_table(title: str, rows: dict[str, Any], score_scale: float) -> str:
    """The rows of :func:`summarise` as a table under ``title``: success in %, the score times
    ``score_scale``, which the score column's header names (``score x100``; ``score`` at 1)."""
    score = "score" if score_scale == 1 else f"score x{score_scale:g}"
    lines = [title,
             f"{'task type':<34}{'n':>5}  {'success % [95% CI]':<24}{score + ' [95% CI]':<24}"]
    for name, r in rows.items():
        lo, hi = r["success_ci95"]
        s, (slo, shi) = r["score"] * score_scale, r["score_ci95"]
        lines.append(
            f"{name:<34}{r['episodes']:>5}  "
            f"{100 * r['success']:5.1f} [{100 * lo:5.1f}, {100 * hi:5.1f}]      "
            f"{s:5.1f} [{slo * score_scale:5.1f}, {shi * score_scale:5.1f}]"
        )
    return "\n".join(lines)


HELD_OUT_NAMES = {"before": "before training", "after_bc": "after the warm start",
                  "after": "after training"}


def held_out_lines(evals: dict[str, Any], names: dict[str, str] | None = None) -> list[str]:
    """One line per held-out evaluation of a training run (``train``'s result: ``before``,
    ``after_bc``, ``iter_<k>``, ``after``), in the order they ran: success with its 95%
    interval, score and mean episode length."""
    names = {**HELD_OUT_NAMES, **(names or {})}
    lines = []
    for key, summary in evals.items():
        if not isinstance(summary, dict) or "all" not in summary:
            continue  # e.g. the warm start's own record
        a = summary["all"]
        lo, hi = a["success_ci95"]
        name = names.get(key, key.replace("iter_", "after iteration "))
        lines.append(f"  {name:<34} success {100 * a['success']:5.1f}% [{100 * lo:4.1f}, "
                     f"{100 * hi:4.1f}]   score {100 * a['score']:5.1f}   mean length "
                     f"{a['mean_length']:4.1f}")
    return lines


def play_in_batches(policy: Any, agent: Any, tasks: Sequence[Any], *, batch: int,
                    new_vec: Callable[[int], GroupVectorEnv],
                    on_step: Callable[[int], None] | None = None
                    ) -> Iterator[tuple[int, StepTable]]:
    """One episode of each of ``tasks`` (a group of one each), ``batch`` tasks at a time:
    yields, per batch, the index of its first task and its step table.

    ``new_vec(n)`` makes the envs for a batch of ``n`` tasks; they serve every batch of that
    size and are closed at the end, or when the generator is closed (whole batches are played,
    so only the last batch may need new ones). ``on_step(finished)`` gets the number of
    episodes finished so far over all the tasks, after every vector step (for progress bars).
    Used by ``gagpo eval`` and by the trainer's held-out evaluation.
    """
    from gagpo.agents.rollout import rollout

    vec = None
    try:
        for start in range(0, len(tasks), batch):
            chunk = tasks[start:start + batch]
            if vec is None or vec.n_tasks != len(chunk):
                if vec is not None:
                    vec.close()
                vec = new_vec(len(chunk))
            progress = None if on_step is None else \
                (lambda k, before=start: on_step(before + k))
            yield start, rollout(policy, agent, vec, chunk, on_step=progress)
    finally:
        if vec is not None:
            vec.close()


def evaluate(
    env_id: str,
    policy_spec: PolicySpec,
    *,
    split: str | None = None,
    episodes: int = 100,
    batch: int = 16,
    batch_tokens: int | None = None,
    backend: str = "inprocess",
    env_kwargs: dict[str, Any] | None = None,
    out: str | Path | None = None,
    history_length: int = 2,
    max_prompt_tokens: int | None = None,
    bf16: str = "auto",
    engine_kwargs: dict[str, Any] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Evaluate a policy on the first ``episodes`` tasks of ``split``, ``batch`` at a time.

    A model run by transformers answers ``batch`` prompts per forward pass (fewer where
    ``batch_tokens`` bounds a pass's cache positions, as the trainer's
    ``--rollout-batch-tokens`` does), stops each reply at
    its ``</action>`` (as the trainer's policy does), and runs under bf16 autocast as ``bf16``
    says (:func:`~gagpo.agents.models.bf16_autocast`); a ``vllm:`` engine computes in that
    precision too, unless ``engine_kwargs`` names a ``dtype``. ``max_prompt_tokens`` caps its
    prompts as the trainer's ``--max-prompt-tokens`` does. ``engine_kwargs`` go to a
    ``vllm:`` policy's engine (``vllm.LLM``), e.g. ``{"enforce_eager": True}``.

    Raises:
        ValueError: an unknown env, a count out of range, or a policy spec that cannot work.
    """
    from gagpo.agents.react import ReActAgent
    from gagpo.envs import env_spec, probe
    from gagpo.envs.vector import GroupVectorEnv

    env_spec(env_id)
    check_number("episodes", episodes, ">= 1", integer=True)
    check_number("batch", batch, ">= 1", integer=True)
    check_number("history_length", history_length, ">= 0", integer=True)
    env_kwargs = dict(env_kwargs or {})
    if split is not None:
        env_kwargs["split"] = split
    # The policy first: a bad spec fails before any env is built, and a vLLM engine starts
    # before WebShop's search imports numba (see gagpo.agents.policies.vllm).
    model_backed = runs_transformers(policy_spec)
    # A vllm: policy builds its prompts with the model's tokenizer, so the budget counts the
    # tokens it prefills, as in training (where the trainer's tokenizer counts them).
    tokenized = model_backed or policy_spec.name.startswith("vllm:")
    if max_prompt_tokens is not None:
        check_number("max_prompt_tokens", max_prompt_tokens, ">= 1", integer=True)
        if not tokenized:
            raise ValueError("--max-prompt-tokens counts a model's tokens: "
                             f"{policy_spec.name!r} has no tokenizer here")
    if batch_tokens is not None and not model_backed:
        raise ValueError("--batch-tokens bounds a transformers model's passes: "
                         f"{policy_spec.name!r} runs none here")
    if engine_kwargs and not policy_spec.name.startswith("vllm:"):
        raise ValueError("--vllm-kwargs configure a vllm: policy's engine: "
                         f"{policy_spec.name!r} is not one")
    options = {"batch_size": batch, "batch_tokens": batch_tokens} if model_backed else {}
    if policy_spec.name.startswith("vllm:"):
        import torch

        from gagpo.agents.models import bf16_autocast, default_device

        # The engine computes in the precision a transformers policy would run under here:
        # vLLM's own "auto" runs a float32 checkpoint in half precision.
        amp = bf16_autocast(bf16, None, default_device())
        options["dtype"] = amp or torch.float32
    policy = build_policy(policy_spec, **{**options, **(engine_kwargs or {})})
    env_kwargs = env_kwargs_for(policy, env_kwargs)
    with probe(env_id, **env_kwargs) as env:  # what the env declares, read once
        tasks = list(env.split_tasks(None))[:episodes]
        label, max_steps = env.report_label, env.max_steps
    agent = ReActAgent(env_id, history_length=history_length, max_steps=max_steps,
                       max_prompt_tokens=max_prompt_tokens,
                       tokenizer=policy.tokenizer if max_prompt_tokens else None)
    autocast = contextlib.nullcontext()
    if model_backed:
        import torch

        from gagpo.agents.models import bf16_autocast

        amp = bf16_autocast(bf16, policy.model, policy.device)
        autocast = torch.autocast(policy.device.type, dtype=amp or torch.bfloat16,
                                  enabled=amp is not None)
    all_episodes: list[dict[str, Any]] = []
    out_dir = Path(out) if out else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "trajectories.jsonl").write_text("")
        (out_dir / EPISODES_FILE).write_text("")
    started = time.perf_counter()
    # Episodes end in bursts (a batch's at its step limit): the ETA uses the whole run's rate
    # (smoothing=0), not a moving average that swings with each burst.
    bar = tqdm(total=len(tasks), desc=f"eval {env_id}", unit="ep", disable=not progress,
               smoothing=0)
    batches = play_in_batches(
        policy, agent, tasks, batch=batch,
        new_vec=lambda n: GroupVectorEnv(env_id, n, 1, backend=backend, env_kwargs=env_kwargs),
        on_step=lambda done: bar.update(done - bar.n))
    try:
        with autocast:
            for start, table in batches:
                episodes = table.episodes()
                all_episodes.extend(episodes)
                if out_dir:
                    with open(out_dir / "trajectories.jsonl", "a", encoding="utf-8") as f:
                        for r in table.rows:
                            row = r.to_dict() | {"task_index": start + r.group}
                            f.write(json.dumps(row, ensure_ascii=False) + "\n")
                    with open(out_dir / EPISODES_FILE, "a", encoding="utf-8") as f:
                        for e in episodes:
                            e = e | {"task_index": start + e["group"]}
                            f.write(json.dumps(e, ensure_ascii=False) + "\n")
    finally:
        bar.close()
        batches.close()  # closes the envs
    rows = summarise(all_episodes)
    summary = {
        "env": env_id, "label": label, "policy": policy_spec.__dict__, "split": split,
        # What the env was made with (catalog, goals...): the viewer rebuilds its shop from it.
        "env_kwargs": {k: v for k, v in env_kwargs.items() if _json_value(v)},
        "episodes": len(all_episodes), "seconds": time.perf_counter() - started, "by_type": rows,
    }
    print(format_table(f"{label}: {policy_spec.name} on {split or 'default split'}", rows,
                       score_scale=100.0))
    if out_dir:
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


@contextlib.contextmanager
def sampling(model: Any, *, engine: Any = None, amp: Any = None) -> Iterator[None]:
    """Where a policy samples from ``model`` (the rollouts, the held-out evaluation): no
    gradient, FSDP's shards gathered, LoRA's adapters folded into the weights
    (:func:`gagpo.common.lora.folded_for_sampling`) unless vLLM's ``engine`` samples (on
    weights of its own), under ``amp`` autocast (none when None)."""
    import torch

    from gagpo.common.lora import folded_for_sampling
    from gagpo.distributed import full_parameters

    folded = folded_for_sampling(model) if engine is None else contextlib.nullcontext()
    device_type = next(model.parameters()).device.type
    with torch.no_grad(), full_parameters(model), folded, \
            torch.autocast(device_type, dtype=amp or torch.bfloat16, enabled=amp is not None):
        yield


def evaluate_model(model: Any, agent: Any, tasks: Sequence[Any], *, compute: Compute,
                   batch: int, temperature: float, seed: int,
                   new_policy: Callable[[int], Any], new_vec: Callable[[int], GroupVectorEnv],
                   engine: Any = None) -> dict[str, Any]:
    """The trainer's held-out evaluation: success and score per task type (as
    :func:`summarise`) on ``tasks``, played at ``temperature`` by the model being trained.

    Each of ``compute.world`` ranks plays its share (``tasks[rank::world]``,
    :func:`play_in_batches`), in eval mode, under ``compute.amp`` autocast, with FSDP shards
    gathered and LoRA's adapters folded into the weights
    (:func:`gagpo.common.lora.folded_for_sampling`); the summary is over all of them. The
    policy is ``new_policy(seed)`` (a transformers policy on ``model``), or the rollout
    ``engine`` (vLLM) given the model's current weights; either way ``seed`` is the
    evaluation's own, so that evaluating never moves the training run's random streams.
    """
    from gagpo.distributed import gather_objects

    mine = list(tasks)[compute.rank::compute.world]
    was_training = model.training
    model.eval()
    if engine is not None:
        from gagpo.vllm_engine import engine_settings, sync_engine

        sync_engine(engine, model)
        settings = engine_settings(engine, temperature, seed)
    else:
        settings = contextlib.nullcontext(new_policy(seed))
    with settings as policy, sampling(model, engine=engine, amp=compute.amp):
        batches = play_in_batches(policy, agent, mine, batch=batch, new_vec=new_vec)
        episodes = [e for _, table in batches for e in table.episodes()]
    model.train(was_training)
    return summarise([e for part in gather_objects(episodes, compute.world) for e in part])

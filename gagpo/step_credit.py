"""From a step table to advantages: each step's reward and penalty under a run's reward rule,
then its advantage by :func:`gagpo.advantages.compute_advantages`.

One rule for every trainer that plays our environments: ``gagpo train`` and verl's trainer
(:mod:`gagpo.integrations.verl`) both call :func:`rewards_and_penalties` and
:func:`step_advantages`, so the same steps get the same advantages in both.

A step table is anything with ``column(name, dtype=None) -> np.ndarray`` (one entry per step
row; :class:`gagpo.agents.rollout.StepTable` is one). The columns read here::

    group, trajectory, t      which task group, which episode, which step of it
    state_key / observation   what makes two steps share a state (``state_grouping``)
    done, won, score          the episode ended at this step; the env's won flag and score
    well_formed, action_valid the reply had an action; the env accepted it

The reward rule: ``reward_scale`` x won (``reward="success"``) or x the env's score
(``"score"``) on an episode's last step, 0 elsewhere; ``invalid_penalty`` on every step whose
reply was malformed or whose action the env rejected, charged to that step alone
(``invalid_penalty_target="step"``) or folded into its reward (``"return"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from gagpo.advantages import (
    DEFAULT_EPISODE_STATS,
    DEFAULT_GAGPO_VARIANT,
    DEFAULT_GAMMA,
    DEFAULT_OMEGA,
    DEFAULT_PENALTY_TARGET,
    EPISODE_STATS,
    ESTIMATORS,
    GAGPO_VARIANTS,
    NORMS,
    PENALTY_TARGETS,
    compute_advantages,
    resolved_lam_norm,
)
from gagpo.common.numbers import check_number

REWARDS: tuple[str, ...] = ("success", "score")
"""What an episode's last step pays: ``reward_scale`` x won, or x the env's score."""
STATE_GROUPINGS: tuple[str, ...] = ("state_key", "observation")
"""What makes two steps share a state: the env's ``state_key``, or the observation text."""


class StepColumns(Protocol):
    """A step table: one array per column name, one entry per step row."""

    def column(self, name: str, dtype: npt.DTypeLike = None) -> np.ndarray: ...


@dataclass(frozen=True)
class CreditSettings:
    """The settings that turn a step table into advantages (``gagpo train``'s flags of the
    same names; :meth:`gagpo.train_config.TrainConfig.credit` gives a run's)."""

    algo: str = "gagpo"
    """The estimator, a name in :data:`gagpo.advantages.ESTIMATORS`."""
    gagpo_variant: str = DEFAULT_GAGPO_VARIANT
    """Which reading of GAGPO (:data:`gagpo.advantages.GAGPO_VARIANTS`)."""
    reward: str = "success"
    """``"success"`` or ``"score"`` (:data:`REWARDS`)."""
    reward_scale: float = 10.0
    """The reward of a won episode (the papers use 10)."""
    invalid_penalty: float = 0.1
    """Charged to a step whose reply was malformed or whose action was rejected."""
    invalid_penalty_target: str = DEFAULT_PENALTY_TARGET
    """``"step"`` (that step alone) or ``"return"`` (folded into its reward)."""
    state_grouping: str = "state_key"
    """``"state_key"`` or ``"observation"`` (:data:`STATE_GROUPINGS`)."""
    gamma: float = DEFAULT_GAMMA
    lam: float | None = None
    """GAE lambda (None: the GAGPO variant's own, else the estimators' default)."""
    norm: str | None = None
    """Group normalisation (None: the GAGPO variant's own, else the estimators' default)."""
    omega: float = DEFAULT_OMEGA
    episode_stats: str = DEFAULT_EPISODE_STATS

    def __post_init__(self) -> None:
        choices: dict[str, tuple[str, ...]] = {
            "algo": tuple(ESTIMATORS), "gagpo_variant": tuple(GAGPO_VARIANTS),
            "reward": REWARDS, "invalid_penalty_target": PENALTY_TARGETS,
            "state_grouping": STATE_GROUPINGS, "norm": NORMS, "episode_stats": EPISODE_STATS,
        }
        for name, known in choices.items():
            value = getattr(self, name)
            if value is not None and value not in known:
                raise ValueError(f"{name} must be one of {list(known)}, not {value!r}")
        check_number("reward_scale", self.reward_scale, "> 0")
        check_number("invalid_penalty", self.invalid_penalty, ">= 0")
        check_number("gamma", self.gamma, "in [0, 1]")
        check_number("lam", self.lam, "in [0, 1]", optional=True)
        check_number("omega", self.omega, ">= 0")

    def lam_norm(self) -> tuple[float, str]:
        """The lambda and normalisation the estimator uses (the variant's own where unset)."""
        return resolved_lam_norm(self.algo, self.gagpo_variant, self.lam, self.norm)


def valid_steps(steps: StepColumns) -> np.ndarray:
    """Per step: the reply was well formed and the env accepted its action."""
    return steps.column("well_formed", bool) & steps.column("action_valid", bool)


def rewards_and_penalties(steps: StepColumns, settings: CreditSettings
                          ) -> tuple[np.ndarray, np.ndarray]:
    """What the estimator gets: r_t, and the amount charged to each step alone (the penalty
    under ``invalid_penalty_target="step"``; 0 under ``"return"``, where r_t holds it)."""
    end = steps.column("won" if settings.reward == "success" else "score", np.float64)
    rewards = np.where(steps.column("done", bool), settings.reward_scale * end, 0.0)
    penalty = np.where(valid_steps(steps), 0.0, settings.invalid_penalty)
    if settings.invalid_penalty_target == "return":
        return rewards - penalty, np.zeros(len(rewards))
    return rewards, penalty


def step_advantages(steps: StepColumns, settings: CreditSettings, rewards: np.ndarray,
                    penalty: np.ndarray | None = None, values: np.ndarray | None = None
                    ) -> tuple[np.ndarray, dict[str, Any]]:
    """One advantage per step (``settings.algo``; PPO's on a critic's ``values``), and the
    estimator's details (returns, grouped values, step-group sizes, the critic's targets)."""
    # object: state keys and observations compared as Python compares the texts.
    keys = steps.column(settings.state_grouping, object)
    lam, norm = settings.lam_norm()
    return compute_advantages(
        settings.algo, group=steps.column("group"), trajectory=steps.column("trajectory"),
        step=steps.column("t", np.int64), key=keys, reward=rewards, gamma=settings.gamma,
        lam=lam, norm=norm, omega=settings.omega, episode_stats=settings.episode_stats,
        gagpo_variant=settings.gagpo_variant, penalty=penalty, value=values,
        return_details=True)


PARTED_BELOW = 0.75
"""A share of steps in a state another rollout of their group visited
(``state/met_fraction``) below which rollouts part and rarely meet again: set between the
ground-truth study's ``tree`` shape, where GiGPO's gain share stays ahead of GAGPO's, and the
nearest shape where GAGPO leads (``dag``; both shares in
``benchmarks/results/credit_truth/report.txt``, the reading in ``docs/algorithms.md``)."""


def estimator_advice(settings: CreditSettings, met_fraction: float) -> str | None:
    """What the ground-truth study recommends for a run in which ``met_fraction`` of the steps
    are in a state another rollout of their group visited, or None where the run's estimator
    is the one it recommends."""
    if settings.algo != "gagpo" or met_fraction >= PARTED_BELOW:
        return None
    return (f"note: {met_fraction:.0%} of this iteration's steps are in a state another "
            "rollout of their group visited: the rollouts part and rarely meet again, where the "
            "ground-truth study found GiGPO's policy-gradient direction better than GAGPO's "
            f"(below {PARTED_BELOW:.0%}; docs/algorithms.md): consider --algo gigpo")

"""The verl trainer ``gagpo``: verl's synchronous PPO trainer, with each step's advantage
computed by :mod:`gagpo.step_credit` (GAGPO, GiGPO, GRPO or RLOO; the run's reward rule and
penalty) on the step table the ``gagpo_env`` agent loop left, and written to every token of
the step's reply.

Chosen with ``trainer.use_v1=True trainer.v1.trainer_mode=gagpo`` once the plugin is loaded.
verl's estimators receive only token rewards, masks and the uid; this trainer reads each
sample's step record instead, so GAGPO groups steps by the environment's ``state_key``
across the G copies of a task, as ``gagpo train`` does.

Private parts of verl this relies on (tested with :data:`gagpo.integrations.verl.VERL_VERSION`):
``PPOTrainer._compute_advantage(batch, metrics)``, the ``trainer_mode`` attribute (kept
``"sync"``, so the replay buffer and checkpoints behave as verl's ``sync`` trainer's), and
TransferQueue's ``kv_batch_get``/``kv_batch_put``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from gagpo.integrations.verl import require_verl

require_verl()

import torch  # noqa: E402
import transfer_queue as tq  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl.trainer.ppo.v1.trainer_base import register_trainer  # noqa: E402
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync  # noqa: E402
from verl.workers.utils.padding import response_to_nested  # noqa: E402

from gagpo import step_credit  # noqa: E402
from gagpo.integrations.verl.settings import read_settings  # noqa: E402
from gagpo.integrations.verl.steps import EXTRA_KEY, VerlStepTable  # noqa: E402
from gagpo.step_credit import CreditSettings  # noqa: E402

logger = logging.getLogger(__name__)

TRAINER_NAME = "gagpo"
"""``trainer.v1.trainer_mode`` that selects this trainer."""
METHODS = ("gagpo", "gigpo", "grpo", "rloo")
"""The estimators this trainer computes (PPO with a critic is verl's own ``gae``)."""


def check_verl_config(config: Any) -> CreditSettings:
    """The run's credit settings, after refusing what this trainer would silently ignore.

    Raises:
        ValueError: naming the setting and what to set instead.
    """
    _, credit = read_settings(config)
    if credit.algo not in METHODS:
        raise ValueError(f"gagpo.algo must be one of {list(METHODS)} in verl (PPO with a "
                         f"learned critic is verl's own adv_estimator=gae), not {credit.algo!r}")
    algorithm = config.algorithm
    if algorithm.get("adv_estimator") == "gae":
        raise ValueError("the gagpo trainer computes advantages itself: set "
                         "algorithm.adv_estimator=grpo (gae would also train a critic it never "
                         "uses)")
    if algorithm.get("use_kl_in_reward", False):
        raise ValueError("the gagpo trainer's rewards are the environment's: set "
                         "algorithm.use_kl_in_reward=False and use actor_rollout_ref.actor."
                         "use_kl_loss=True for a KL term")
    correction = algorithm.get("rollout_correction", None) or {}
    if (correction.get("rollout_is") or correction.get("rollout_rs")) \
            and not correction.get("bypass_mode", False):
        raise ValueError("the gagpo trainer does not apply verl's decoupled rollout "
                         "correction: leave algorithm.rollout_correction.rollout_is and "
                         "rollout_rs unset, or set its bypass_mode")
    return credit


def step_advantages(keys: list[str], records: list[Any], is_padding: list[bool],
                    credit: CreditSettings) -> tuple[np.ndarray, dict[str, float]]:
    """One advantage per sample (0 on verl's padding samples and on episodes an environment
    error ended), and the batch's metrics. ``records`` are the samples' ``extra_fields``."""
    n = len(keys)
    advantages = np.zeros(n)
    real = [i for i in range(n) if not is_padding[i]]
    steps = [_record(records[i], keys[i]) for i in real]
    table = VerlStepTable([keys[i] for i in real], steps)
    failed_traj = set(table.column("trajectory", object)[table.column("failed", bool)])
    kept = np.array([t not in failed_traj for t in table.column("trajectory", object)], bool)
    metrics = episode_metrics(table, kept)
    if kept.any():
        rows = np.flatnonzero(kept)
        table = VerlStepTable([keys[real[j]] for j in rows], [steps[j] for j in rows])
        rewards, penalty = step_credit.rewards_and_penalties(table, credit)
        adv, details = step_credit.step_advantages(table, credit, rewards, penalty)
        advantages[[real[j] for j in rows]] = adv
        metrics["gagpo/shared_fraction"] = float(details["shared_fraction"])
        metrics["gagpo/met_fraction"] = float(details["met_fraction"])
        metrics["gagpo/advantage_mean"] = float(adv.mean())
        metrics["gagpo/advantage_std"] = float(adv.std())
    return advantages, metrics


def _record(extra: Any, key: str) -> dict[str, Any]:
    if not isinstance(extra, dict) or EXTRA_KEY not in extra:
        raise ValueError(f"sample {key!r} carries no gagpo step record: the gagpo trainer "
                         "needs the gagpo_env agent loop (agent_name in the dataset, or "
                         "actor_rollout_ref.rollout.agent.default_agent_loop=gagpo_env)")
    return extra[EXTRA_KEY]


def episode_metrics(table: VerlStepTable, kept: np.ndarray) -> dict[str, float]:
    """Success, score, length and invalid share over the batch's episodes (its last rows)."""
    traj = np.unique(table.column("trajectory", object).astype(str), return_inverse=True)[1]
    order = np.lexsort((table.column("t", np.int64), traj.reshape(-1)))
    ends = order[np.r_[traj[order][1:] != traj[order][:-1], True]] if len(order) else order
    return {
        "gagpo/episodes": float(len(ends)),
        "gagpo/failed_episodes": float(len(ends) - int(kept[ends].sum())) if len(ends) else 0.0,
        "gagpo/success": float(table.column("won", bool)[ends].mean()) if len(ends) else 0.0,
        "gagpo/score": float(table.column("score", np.float64)[ends].mean()) if len(ends) else 0.0,
        "gagpo/episode_steps": float(len(traj) / max(len(ends), 1)),
        "gagpo/invalid_rate": float((~step_credit.valid_steps(table)).mean()) if len(traj)
        else 0.0,
    }


@register_trainer(TRAINER_NAME)
class GagpoTrainer(PPOTrainerSync):
    """verl's synchronous trainer; advantages from :func:`step_advantages`."""

    @property
    def trainer_mode(self) -> str:
        # verl keys its sync behaviour (replay buffer, refills, checkpoints) on this name.
        return "sync"

    @trainer_mode.setter
    def trainer_mode(self, value: str) -> None:
        pass  # verl sets it from trainer.v1.trainer_mode ("gagpo"); this trainer stays sync

    def __init__(self, config: Any) -> None:
        self.credit = check_verl_config(config)
        super().__init__(config)

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=["response_mask", "extra_fields"])
        response_mask = data["response_mask"]
        padded_mask = torch.nested.to_padded_tensor(response_mask, 0) \
            if response_mask.is_nested else response_mask
        is_padding = [bool(tag.get("is_padding", False)) for tag in batch.tags]
        advantages, step_metrics = step_advantages(list(batch.keys), list(data["extra_fields"]),
                                                   is_padding, self.credit)
        metrics.update(step_metrics)
        per_token = torch.as_tensor(advantages, dtype=torch.float32).unsqueeze(-1) \
            * padded_mask.to(torch.float32)
        nested = response_to_nested(per_token, response_mask)
        tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                        fields=TensorDict({"advantages": nested, "returns": nested.clone()},
                                          batch_size=len(batch)))
        return batch

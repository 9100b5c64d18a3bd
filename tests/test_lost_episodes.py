"""Rows of an episode lost to its env (the env raised, or its worker died) never reach the
update: the trainer's step table, its advantages and the batch it trains on hold the other
episodes' rows only, and those advantages are the estimator's on them alone (replayed here with
the public ``compute_advantages``)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import corridor  # noqa: E402  (registers Corridor-v0)

import gagpo.trainer as trainer  # noqa: E402
from gagpo.advantages import compute_advantages  # noqa: E402
from gagpo.train_config import TrainConfig  # noqa: E402

torch.set_num_threads(1)
ENV_ID = "CorridorLosesOne-v0"


class _LosesOne(corridor.Corridor):
    """Corridor-v0 whose third instance to reset (env 2 of the trainer's vector env, which
    resets its envs in order: group 1, copy 0 of 2 groups of 2) raises on its second step: an
    episode lost after a step that went well."""

    resets = 0
    crashed_after: list[int] = []  # the steps the lost episode took before it broke

    def _reset(self, task, split):
        self.number, self.taken = type(self).resets, 0
        type(self).resets += 1
        return super()._reset(task, split)

    def _step(self, action: str):
        if self.number == 2 and self.taken == 1:
            self.crashed_after.append(self.taken)
            raise RuntimeError("the env broke")
        self.taken += 1
        return super()._step(action)


@pytest.fixture
def losing_env():
    gym.register(ENV_ID, entry_point=_LosesOne, max_episode_steps=corridor.MAX_STEPS,
                 disable_env_checker=True)
    _LosesOne.resets, _LosesOne.crashed_after = 0, []
    yield ENV_ID
    gym.registry.pop(ENV_ID)


@pytest.fixture
def batches(monkeypatch) -> list[dict]:
    """The batches the real update is called with (recorded, then passed on unchanged)."""
    seen: list[dict] = []
    real = trainer.update

    def recording(model, ref_model, optimizer, batch, *args, **kwargs):
        seen.append({k: list(v) for k, v in dataclasses.asdict(batch).items()})
        return real(model, ref_model, optimizer, batch, *args, **kwargs)

    monkeypatch.setattr(trainer, "update", recording)
    return seen


@pytest.mark.parametrize("algo", ["gagpo", "grpo"])
def test_rows_of_an_episode_lost_to_its_env_do_not_reach_the_update(tmp_path, losing_env,
                                                                    batches, algo):
    cfg = TrainConfig(env=losing_env, model="tiny", mode="score", algo=algo, n_groups=2,
                      group_size=2, iterations=1, history_length=0, eval_episodes=0,
                      env_kwargs={"length": 3},
                      tensorboard=False, progress=False, out_dir=str(tmp_path), seed=1,
                      save_every=0)
    with pytest.warns(RuntimeWarning, match="raised in step"):
        trainer.train(cfg)
    assert _LosesOne.crashed_after == [1]  # lost at its second step, its first kept
    with np.load(tmp_path / "steps" / "iter_00001.npz") as f:
        table = {k: f[k] for k in f.files}
    # The step table the update came from: trajectory 2 (the lost one) is gone; its group
    # keeps its other copy, and the other group both of its own.
    assert 2 not in set(table["trajectory"].tolist())
    assert set(table["trajectory"].tolist()) == {0, 1, 3}
    assert set(table["group"][table["trajectory"] == 3].tolist()) == {1}
    # The batch: one action per kept row (all have tokens here), with the advantages that the
    # estimator gives the kept rows alone.
    (batch,) = batches
    n = len(table["trajectory"])
    assert len(batch["adv"]) == len(batch["prompt"]) == n
    want = compute_advantages(
        algo, group=table["group"].tolist(), trajectory=table["trajectory"].tolist(),
        step=table["t"].astype(np.int64), key=table["state_key"].tolist(),
        reward=table["reward"].astype(np.float64), penalty=table["penalty"].astype(np.float64),
        gamma=cfg.gamma, lam=cfg.lam, norm=cfg.norm, omega=cfg.omega,
        episode_stats=cfg.episode_stats)
    np.testing.assert_allclose(batch["adv"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(table["advantage"], want, rtol=1e-5, atol=1e-5)
    # Group 1's copy that played on has an advantage of its own group of one (0 under GRPO's
    # normalisation), which the lost copy would have changed.
    if algo == "grpo":
        assert (table["advantage"][table["group"] == 1] == 0).all()


def test_rows_of_episodes_lost_with_their_worker_process_do_not_reach_the_update(
        tmp_path, batches):
    """Worker processes: one dies at its envs' second step (a good first step kept in the
    rollout). Its envs' episodes are lost whole; the others' rows, and theirs alone, are
    trained on, with the advantages of those rows alone."""
    flag = tmp_path / "died"
    cfg = TrainConfig(env="lossy_corridor:LossyCorridor-v0", model="tiny", mode="score",
                      algo="gagpo", n_groups=1, group_size=4, iterations=1, history_length=0,
                      eval_episodes=0, tensorboard=False, progress=False, backend="process",
                      env_kwargs={"length": 3, "die_flag": str(flag)},
                      out_dir=str(tmp_path / "run"), seed=1, save_every=0)
    trainer.train(cfg)
    assert flag.exists()  # a worker died
    with np.load(tmp_path / "run" / "steps" / "iter_00001.npz") as f:
        table = {k: f[k] for k in f.files}
    kept = set(table["trajectory"].tolist())
    # The dead worker's episodes (all live then; as many as the envs it was dealt) are gone,
    # their first steps included; the others are whole, to their end.
    assert 0 < len(kept) < 4, kept
    assert (table["t"] == 0).sum() == len(kept)
    for k in kept:
        rows = np.flatnonzero(table["trajectory"] == k)
        assert table["done"][rows[np.argmax(table["t"][rows])]], k
    (batch,) = batches
    assert len(batch["adv"]) == len(table["trajectory"])
    want = compute_advantages(
        "gagpo", group=table["group"].tolist(), trajectory=table["trajectory"].tolist(),
        step=table["t"].astype(np.int64), key=table["state_key"].tolist(),
        reward=table["reward"].astype(np.float64), penalty=table["penalty"].astype(np.float64),
        gamma=cfg.gamma, lam=cfg.lam, norm=cfg.norm)
    np.testing.assert_allclose(batch["adv"], want, rtol=1e-5, atol=1e-5)

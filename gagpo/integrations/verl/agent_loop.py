"""The verl agent loop ``gagpo_env``: one episode of any environment registered under our
contract, one verl sample per environment step.

Each step's prompt is the one our ReAct agent builds for ``gagpo train`` (the same template,
the last ``history_length`` (observation, action) pairs, history dropped oldest first to fit
``rollout.prompt_length``), the reply is parsed by the same parser, and a reply without an
action is still sent, so the environment answers it as an invalid action and the trainer
charges the penalty. Each sample carries its step's :class:`~.steps.StepRecord` in
``extra_fields["gagpo"]``: trajectory and step (through verl's key
``{uid}_{session}_{index}``), state key, reward, validity, won and score, all the trainer needs.

The ``rollout.n`` sessions of one dataset row are the G copies of its task: they reset the
environment with the row's task, split and seed, so they start in one state.

Why one sample per step (verl-agent's shape) and not one per trajectory (turns concatenated,
verl's multi-turn tool loop): it keeps our trainer's memory window, so a prompt stays short on
50-step ALFWorld episodes, and each step is a row of the step table whose advantage is exactly
``gagpo train``'s. The cost: a task yields a variable number of samples (``docs/verl.md``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from gagpo.integrations.verl import require_verl

require_verl()

import gymnasium as gym  # noqa: E402
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

import gagpo.envs  # noqa: E402,F401  (registers WebShop-v0 and ALFWorld-v0)
from gagpo.agents.react import ReActAgent, registered_max_steps  # noqa: E402
from gagpo.envs import env_spec  # noqa: E402
from gagpo.integrations.verl.settings import AgentSettings, read_settings  # noqa: E402
from gagpo.integrations.verl.steps import EXTRA_KEY, StepRecord  # noqa: E402

logger = logging.getLogger(__name__)

AGENT_NAME = "gagpo_env"
"""The name datasets give in ``agent_name`` (or ``rollout.agent.default_agent_loop``)."""


@dataclass(frozen=True)
class Episode:
    """Which episode a dataset row asks for."""

    env_id: str
    task: Any
    split: str | None
    seed: int | None
    index: int


def episode_of(row: dict[str, Any]) -> Episode:
    """The episode of a dataset row as verl hands it to the loop: ``data_source`` is the env id,
    ``extra_info`` holds ``task``, ``split``, ``seed`` and ``index``
    (:mod:`gagpo.integrations.verl.dataset` writes such rows).

    Raises:
        ValueError: the row names no environment or no task.
    """
    extra = row.get("extra_info") or {}
    env_id = row.get("data_source")
    if not env_id or "task" not in extra:
        raise ValueError(f"a gagpo_env row needs data_source (the env id) and extra_info.task; "
                         f"got data_source={env_id!r}, extra_info={extra!r}: write the "
                         "dataset with `gagpo verl-data`")
    env_spec(str(env_id))  # a clear error for an unregistered id
    seed = extra.get("seed")
    return Episode(env_id=str(env_id), task=_plain_value(extra["task"]),
                   split=extra.get("split") or None,
                   seed=None if seed is None else int(seed), index=int(extra.get("index", 0)))


def _plain_value(v: Any) -> Any:
    """numpy scalars from parquet as Python values (the env checks the task's type)."""
    return v.item() if hasattr(v, "item") else v


def step_limit(env_id: str, settings: AgentSettings) -> int:
    """The episode's step limit: the settings', else the registered env's."""
    limit = settings.max_steps or registered_max_steps(env_id)
    if not limit:
        raise ValueError(f"{env_id} registers no step limit: set +gagpo.max_steps")
    return int(limit)


@register(AGENT_NAME)
class GymEnvAgentLoop(AgentLoopBase):
    """Plays one episode of the row's environment with the ReAct agent; returns one
    :class:`AgentLoopOutput` per step (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings, self.credit = read_settings(self.config)
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> list[AgentLoopOutput]:
        episode = episode_of(kwargs)
        limit = step_limit(episode.env_id, self.settings)
        env = gym.make(episode.env_id, max_steps=limit, **self.settings.env_kwargs)
        try:
            try:
                obs, info = env.reset(seed=episode.seed,
                                      options={"task": episode.task, "split": episode.split})
            except (TypeError, ValueError) as e:
                raise ValueError(f"dataset row {episode.index} ({episode.env_id}): {e}") from e
            return await self._play(env, episode, limit, obs, info, sampling_params)
        finally:
            env.close()

    async def _play(self, env: Any, episode: Episode, limit: int, obs: str,
                    info: dict[str, Any], sampling_params: dict[str, Any]
                    ) -> list[AgentLoopOutput]:
        agent = ReActAgent(episode.env_id, self.settings.history_length,
                           max_prompt_tokens=self.prompt_length, tokenizer=self.tokenizer,
                           map_near_miss=self.settings.map_near_miss,
                           near_miss_cutoff=self.settings.near_miss_cutoff, max_steps=limit)
        outputs: list[AgentLoopOutput] = []
        for t in range(limit):
            prompt_ids = await self.ct_build_initial_tokens(agent.messages(0, obs, info))
            started = time.perf_counter()
            generated = await self.server_manager.generate(
                request_id=uuid4().hex, prompt_ids=prompt_ids, sampling_params=sampling_params)
            generation_seconds = time.perf_counter() - started
            merged, mask, logprobs = await self.ct_merge_assistant_token(
                prompt_ids, generated.token_ids, [], [] if generated.log_probs else None,
                assistant_logprobs=generated.log_probs or None)
            response_ids = merged.token_ids[len(merged.token_ids) - len(mask):] if mask else []
            prompt_ids = merged.token_ids[:len(merged.token_ids) - len(mask)]
            response_ids, mask = response_ids[:self.response_length], mask[:self.response_length]
            reply = self.tokenizer.decode([i for i, m in zip(response_ids, mask, strict=True)
                                           if m], skip_special_tokens=True)
            parsed = agent.parse(reply, info.get("admissible_actions", []))
            # A reply without an action is still sent: the env answers it as an invalid action.
            action = parsed.action if parsed.action is not None else reply
            started = time.perf_counter()
            record, next_obs, next_info = self._step(env, episode, t, obs, info, action,
                                                     parsed.well_formed, last=t == limit - 1)
            outputs.append(AgentLoopOutput(
                prompt_ids=prompt_ids, response_ids=response_ids, response_mask=mask,
                response_logprobs=logprobs[:self.response_length] if logprobs else None,
                num_turns=2,
                metrics=AgentLoopMetrics(generate_sequences=generation_seconds,
                                         tool_calls=time.perf_counter() - started),
                extra_fields={EXTRA_KEY: record.to_dict(), "turn_scores": [],
                              "tool_rewards": []}))
            if record.done:
                break
            agent.observe(0, obs, action)
            obs, info = next_obs, next_info
        self._score_episode(outputs)
        return outputs

    def _step(self, env: Any, episode: Episode, t: int, obs: str, info: dict[str, Any],
              action: str, well_formed: bool, last: bool
              ) -> tuple[StepRecord, str, dict[str, Any]]:
        """One environment step as a record; an environment that raises ends the episode with
        a failed record (logged), never the whole group of rollouts."""
        before = {"t": t, "task_id": str(info.get("task_id", "")),
                  "task_type": str(info.get("task_type", "")),
                  "state_key": str(info.get("state_key", "")), "observation": obs,
                  "action": action, "well_formed": well_formed}
        try:
            next_obs, reward, terminated, truncated, next_info = env.step(action)
        except Exception as e:  # the env's bug: keep the episode, say why it ended
            logger.error("%s task %r (row %d) raised at step %d on %r; the episode ends here "
                         "and is left out of the advantages", episode.env_id, episode.task,
                         episode.index, t, action, exc_info=True)
            record = StepRecord(**before, action_valid=False, env_reward=0.0, done=True,
                                terminated=False, won=False, score=0.0, failed=True,
                                error=f"{type(e).__name__}: {e}")
            return record, obs, info
        # The step limit ends the episode even where an environment forgot to truncate.
        done = bool(terminated or truncated or last)
        record = StepRecord(**before, action_valid=bool(next_info.get("action_valid", False)),
                            env_reward=float(reward), done=done, terminated=bool(terminated),
                            won=bool(next_info.get("won", False)),
                            score=float(next_info.get("score", 0.0)))
        return record, next_obs, next_info

    def _score_episode(self, outputs: list[AgentLoopOutput]) -> None:
        """verl's own reward fields, for its metrics: the episode's reward under the run's
        rule on its last sample (verl copies it to the others), with won and score beside it
        (verl requires ``reward_extra_info`` wherever ``reward_score`` is set). The advantages
        read the step records, not these."""
        last = outputs[-1].extra_fields[EXTRA_KEY]
        end = last["won"] if self.credit.reward == "success" else last["score"]
        outputs[-1].reward_score = float(self.credit.reward_scale * end)
        outputs[-1].extra_fields["reward_extra_info"] = {
            "won": float(last["won"]), "score": float(last["score"]),
            "episode_steps": float(len(outputs)), "failed": float(last["failed"])}

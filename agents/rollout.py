"""Running a policy over a group vector env: the step table.

One row per environment step, in the order steps happened:

==================  ===========================================================================
``group``           index of the task in the rollout (the N of N x G)
``trajectory``      index of the episode (= the env index, ``group * G + copy``)
``t``               step number inside the episode, from 0
``task_id``         the env's task id
``task_type``       the env's task type (``info["task_type"]``; WebShop: the product category)
``state_key``       the env's state key *before* the action (the state the action was taken in)
``observation``     the observation the prompt showed
``prompt``          the chat messages sent to the policy (built when first read)
``reply``           the policy's reply text
``action``          what was sent to the env (the parsed action, or the raw reply if none)
``well_formed``     the reply had the ``<think>..</think><action>..</action>`` shape
``action_valid``    the env accepted the action
``reward``          the env's reward for this step
``done``            the episode ended at this step (terminated or truncated)
``terminated``      ended by the task (WebShop: bought; ALFWorld: won)
``won``             the task is accomplished after this step
``score``           the env's score after this step
``token_ids``       the reply's token ids (empty for policies that do not expose them)
``logprobs``        their log-probs under the policy that sampled them
``prompt_token_ids`` the prompt's token ids, when the policy tokenised it (the trainer
                    recomputes log-probs on exactly these tokens)
``failed``          the episode was lost to a dead env worker
==================  ===========================================================================
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gagpo.agents.policies.base import Policy, Request
from gagpo.agents.react import ReActAgent


@dataclass(slots=True)
class StepRow:
    group: int
    trajectory: int
    t: int
    task_id: str
    task_type: str
    state_key: str
    observation: str
    request: Request = field(repr=False, compare=False)
    """The request the policy answered; :attr:`prompt` reads its messages."""
    reply: str
    action: str
    well_formed: bool
    action_valid: bool
    reward: float
    done: bool
    terminated: bool
    won: bool
    score: float
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    prompt_token_ids: list[int] | None = None
    failed: bool = False

    @property
    def prompt(self) -> list[dict[str, str]]:
        """The chat messages sent to the policy."""
        return self.request.messages

    def to_dict(self) -> dict[str, Any]:
        """The row as plain JSON-ready values: every column, ``prompt`` in place of the
        request."""
        out = {}
        for f in fields(self):
            if f.name == "request":
                out["prompt"] = self.prompt
            else:
                out[f.name] = getattr(self, f.name)
        return out


#: The names :meth:`StepTable.column` reads: every :class:`StepRow` field, and ``prompt``.
COLUMNS: tuple[str, ...] = (*(f.name for f in fields(StepRow)), "prompt")
_OBJECT_COLUMNS = frozenset({"request", "prompt", "token_ids", "logprobs", "prompt_token_ids"})
_EMPTY_DTYPES: dict[str, type] = {
    f.name: {"int": np.int64, "str": np.str_, "bool": np.bool_, "float": np.float64}[str(f.type)]
    for f in fields(StepRow) if str(f.type) in ("int", "str", "bool", "float")}
"""The dtype of a scalar column with no rows (numpy would make every empty one float64, and
joining it with other tables would turn their flags and texts into numbers)."""


@dataclass
class StepTable:
    """The rows of one rollout, plus per-episode summaries."""

    rows: list[StepRow]
    num_envs: int
    group_size: int

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str, dtype: npt.DTypeLike = None) -> np.ndarray:
        """Column ``name`` (a :class:`StepRow` field, or ``prompt``): one entry per row, in
        row order.

        Numbers and flags come back as a numeric or bool array, text as a unicode array, cast
        to ``dtype`` when given (``column("t", np.int64)``). The list-valued columns
        (``token_ids``, ``logprobs``, ``prompt_token_ids``, ``prompt``) and ``request`` come
        back as a 1-d object array holding each row's own value, as does any column read with
        ``dtype=object`` (text compared as Python compares it: a unicode array drops trailing
        NUL characters).

        Raises:
            KeyError: ``name`` is not a column.
        """
        if name not in COLUMNS:
            raise KeyError(f"no column {name!r}; the columns are {list(COLUMNS)}")
        values = [getattr(r, name) for r in self.rows]
        if not values and dtype is None:
            dtype = _EMPTY_DTYPES.get(name)
        if name in _OBJECT_COLUMNS or (dtype is not None and np.dtype(dtype) == object):
            # fromiter, not asarray: lists of one length would become a 2-d array.
            return np.fromiter(values, dtype=object, count=len(values))
        return np.asarray(values, dtype=dtype)

    def episodes(self) -> list[dict[str, Any]]:
        """One summary per trajectory: task, length, return, final score, won, failed, how
        many of its replies were malformed (no parsable action) or named no admissible action,
        and its actions in order (what a policy learned to do: page, buy, walk)."""
        out: dict[int, dict[str, Any]] = {}
        for r in sorted(self.rows, key=lambda r: r.t):  # stable: a step's rows stay in order
            e = out.setdefault(r.trajectory, {
                "trajectory": r.trajectory, "group": r.group, "task_id": r.task_id,
                "task_type": r.task_type,
                "length": 0, "return": 0.0, "score": 0.0, "won": False, "failed": False,
                "invalid_actions": 0, "malformed_replies": 0, "actions": [],
            })
            e["length"] += 1
            e["return"] += r.reward
            e["score"], e["won"] = r.score, r.won
            e["failed"] = e["failed"] or r.failed
            e["invalid_actions"] += not r.action_valid
            e["malformed_replies"] += not r.well_formed
            e["actions"].append(r.action)
        return [out[k] for k in sorted(out)]

    def write_jsonl(self, path: str | Path) -> None:
        """Every row as one JSON line (UTF-8)."""
        with open(path, "w", encoding="utf-8") as f:
            for r in self.rows:
                f.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")


def rollout(
    policy: Policy,
    agent: ReActAgent,
    vec,
    tasks: Sequence[int | str],
    seeds: Sequence[int] | None = None,
    on_step: Callable[[int], None] | None = None,
) -> StepTable:
    """Play one episode in every env of ``vec`` (a :class:`gagpo.envs.vector.GroupVectorEnv`):
    group ``i`` plays ``tasks[i]``. The policy is asked once per step for all live envs
    together (one batch). ``on_step(n_finished)`` is called after every vector step, for
    progress bars."""
    obs, infos = vec.reset(tasks, seeds)
    n, size = vec.num_envs, vec.group_size
    agent.reset()
    t = [0] * n
    rows: list[StepRow] = []
    # Plain lists and ints inside the loop: numpy scalars cost ~10x more per access, and this
    # loop runs once per env step (its cost is the machinery's overhead over the env).
    while vec.live.any():
        live = np.flatnonzero(vec.live).tolist()
        requests = agent.requests([obs[i] for i in live], [infos[i] for i in live], live)
        replies = policy.act(requests)
        if len(replies) != len(requests):
            raise RuntimeError(f"the policy gave {len(replies)} replies to {len(requests)}")
        parsed = agent.parse_replies(replies, requests)
        actions: list[str | None] = [None] * n
        for i, p, rep in zip(live, parsed, replies, strict=True):
            # A reply without an action is still sent: the env answers it as an invalid
            # action (a no-op with feedback), which is what the agent must learn to avoid.
            actions[i] = p.action if p.action is not None else rep.text
        new_obs, rewards, terminated, truncated, new_infos = vec.step(actions)
        rewards, terminated, truncated = rewards.tolist(), terminated.tolist(), truncated.tolist()
        failed_now = vec.failed.tolist()
        for i, request, reply, p in zip(live, requests, replies, parsed, strict=True):
            info, last = new_infos[i] or {}, infos[i]
            rows.append(StepRow(
                group=i // size, trajectory=i, t=t[i],
                task_id=str(last.get("task_id", "")),
                task_type=str(last.get("task_type", "")),
                state_key=str(last.get("state_key", "")),
                observation=obs[i], request=request, reply=reply.text,
                action=actions[i], well_formed=p.well_formed,
                action_valid=bool(info.get("action_valid", False)),
                reward=float(rewards[i]), done=terminated[i] or truncated[i],
                terminated=terminated[i], won=bool(info.get("won", False)),
                score=float(info.get("score", 0.0)),
                token_ids=reply.token_ids, logprobs=reply.logprobs,
                prompt_token_ids=reply.prompt_token_ids,
                failed=failed_now[i],
            ))
            if failed_now[i]:  # the whole episode is unusable, not just its last step
                for r in rows:
                    if r.trajectory == i:
                        r.failed = True
            agent.observe(i, obs[i], actions[i])
            obs[i], infos[i] = new_obs[i], info
            t[i] += 1
        if on_step is not None:
            on_step(n - len(np.flatnonzero(vec.live)))
    return StepTable(rows=rows, num_envs=n, group_size=size)

"""The record each environment step leaves in verl's batch, and the step table made of them.

The agent loop stores one :class:`StepRecord` per step in the sample's
``extra_fields["gagpo"]``; verl stores the sample under the key ``{uid}_{session}_{index}``
(``uid``: the task's prompt, one per dataset row drawn; ``session``: which of the
``rollout.n`` copies). :class:`VerlStepTable` turns keys and records back into the step table
:mod:`gagpo.step_credit` reads: the group is the uid, the trajectory the uid and session.
Nothing here imports verl.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

EXTRA_KEY = "gagpo"
"""The key of a sample's ``extra_fields`` that holds its :class:`StepRecord` (as a dict)."""


@dataclass(frozen=True)
class StepRecord:
    """What one environment step tells the trainer (the columns of
    :class:`gagpo.agents.rollout.StepTable` that credit needs, and what to log)."""

    t: int
    """Step number inside the episode, from 0."""
    task_id: str
    task_type: str
    state_key: str
    """The state key *before* the action (the state the action was taken in)."""
    observation: str
    """The observation the prompt showed."""
    action: str
    """What was sent to the environment (the parsed action, or the raw reply if none)."""
    well_formed: bool
    action_valid: bool
    env_reward: float
    done: bool
    terminated: bool
    won: bool
    score: float
    failed: bool = False
    """The environment raised on this step: the episode ends here and is left out of the
    advantages (its rows get 0), as the trainer leaves out episodes lost to a dead worker."""
    error: str = ""
    """The environment's exception, when ``failed``."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(StepRecord))


def split_key(key: str) -> tuple[str, str, int]:
    """``(uid, session, index)`` of a verl sample key ``{uid}_{session}_{index}`` (the uid may
    hold underscores)."""
    parts = str(key).rsplit("_", 2)
    if len(parts) != 3 or not parts[2].isdigit():
        raise ValueError(f"not a verl sample key {{uid}}_{{session}}_{{index}}: {key!r}")
    return parts[0], parts[1], int(parts[2])


class VerlStepTable:
    """The step rows of verl samples: ``column(name)`` as :class:`gagpo.step_credit.StepColumns`.

    Args:
        keys: the samples' keys, ``{uid}_{session}_{index}``.
        records: each sample's ``extra_fields[EXTRA_KEY]`` (a dict of :class:`StepRecord`).
    """

    def __init__(self, keys: Sequence[str], records: Sequence[dict[str, Any]]) -> None:
        if len(keys) != len(records):
            raise ValueError(f"{len(keys)} keys but {len(records)} step records")
        parsed = [split_key(k) for k in keys]
        self._columns: dict[str, list[Any]] = {
            "group": [uid for uid, _, _ in parsed],
            "trajectory": [f"{uid}_{session}" for uid, session, _ in parsed],
        }
        for i, r in enumerate(records):
            if not isinstance(r, dict) or set(RECORD_FIELDS) - set(r):
                missing = sorted(set(RECORD_FIELDS) - set(r)) if isinstance(r, dict) else "all"
                raise ValueError(f"sample {keys[i]!r} has no gagpo step record (missing "
                                 f"{missing}): was it played by the gagpo_env agent loop?")
        for name in RECORD_FIELDS:
            self._columns[name] = [r[name] for r in records]
        self._columns["reward"] = self._columns["env_reward"]

    def __len__(self) -> int:
        return len(self._columns["group"])

    def column(self, name: str, dtype: npt.DTypeLike = None) -> np.ndarray:
        """Column ``name`` over the rows (object arrays for text read with ``dtype=object``)."""
        if name not in self._columns:
            raise KeyError(f"no column {name!r}; the columns are {sorted(self._columns)}")
        values = self._columns[name]
        if dtype is not None and np.dtype(dtype) == object:
            return np.fromiter(values, dtype=object, count=len(values))
        return np.asarray(values, dtype=dtype)

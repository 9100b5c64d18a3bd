"""Our settings inside verl's configuration: one ``gagpo`` section, flat.

Given on verl's command line as Hydra additions (the section is not in verl's own schema)::

    +gagpo.history_length=2 +gagpo.algo=gagpo +gagpo.gagpo_variant=paper \\
    +gagpo.env_kwargs.observation_mode=text

The agent loop reads the :class:`AgentSettings` fields, the trainer the
:class:`gagpo.step_credit.CreditSettings` fields (``gagpo train``'s flags of the same names and
defaults). An unknown name is refused with the known ones listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from gagpo.common.numbers import check_number
from gagpo.step_credit import CreditSettings

SECTION = "gagpo"
"""The key of verl's configuration that holds these settings."""


@dataclass(frozen=True)
class AgentSettings:
    """How the agent loop plays an environment (``gagpo train``'s flags of the same names)."""

    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """``gymnasium.make`` arguments of every episode's environment (the env id is the dataset
    row's ``data_source``)."""
    history_length: int = 2
    """(observation, action) pairs shown in the prompt (the papers use 2)."""
    map_near_miss: bool = False
    """Map a near-miss action to the closest admissible one when parsing."""
    near_miss_cutoff: float = 80.0
    max_steps: int | None = None
    """Episode step limit (None: the environment's own, 15 for WebShop-v0, 50 for ALFWorld-v0)."""

    def __post_init__(self) -> None:
        check_number("history_length", self.history_length, ">= 0", integer=True)
        check_number("near_miss_cutoff", self.near_miss_cutoff, ">= 0")
        check_number("max_steps", self.max_steps, ">= 1", integer=True, optional=True)
        if not isinstance(self.env_kwargs, dict):
            raise ValueError(f"env_kwargs must be a mapping, not {self.env_kwargs!r}")


AGENT_FIELDS = frozenset(f.name for f in fields(AgentSettings))
CREDIT_FIELDS = frozenset(f.name for f in fields(CreditSettings))


def read_settings(config: Any) -> tuple[AgentSettings, CreditSettings]:
    """The agent's and the credit's settings from verl's configuration (a DictConfig or a
    mapping); defaults where the ``gagpo`` section, or a name in it, is absent.

    Raises:
        ValueError: an unknown name, or a value out of range.
    """
    section = config.get(SECTION) if hasattr(config, "get") else None
    values = _plain(section) if section is not None else {}
    if not isinstance(values, dict):
        raise ValueError(f"the {SECTION} section of verl's configuration must be a mapping, "
                         f"not {values!r}")
    unknown = sorted(set(values) - AGENT_FIELDS - CREDIT_FIELDS)
    if unknown:
        raise ValueError(f"unknown {SECTION}.* settings {unknown}; known: "
                         f"{sorted(AGENT_FIELDS | CREDIT_FIELDS)}")
    agent = AgentSettings(**{k: v for k, v in values.items() if k in AGENT_FIELDS})
    credit = CreditSettings(**{k: v for k, v in values.items() if k in CREDIT_FIELDS})
    return agent, credit


def _plain(section: Any) -> Any:
    """A DictConfig as plain Python containers (anything else as it is)."""
    try:
        from omegaconf import OmegaConf
    except ImportError:  # pragma: no cover - omegaconf comes with verl
        return section
    return OmegaConf.to_container(section, resolve=True) if OmegaConf.is_config(section) \
        else section

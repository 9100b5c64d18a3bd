"""The action, observation and state of a served gagpo env (defined in gagpo.openenv_client)."""

from gagpo.openenv_client import TextAction, TextObservation, TextState

__all__ = ["TextAction", "TextObservation", "TextState"]

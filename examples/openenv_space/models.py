"""The action, observation and state of a served gagpo env (defined in
gagpo.integrations.openenv.models)."""

from gagpo.integrations.openenv.models import TextAction, TextObservation, TextState

__all__ = ["TextAction", "TextObservation", "TextState"]

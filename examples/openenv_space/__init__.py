"""gagpo's WebShop-v0 / ALFWorld-v0 as an OpenEnv environment (client side)."""

from .client import GagpoEnvClient
from .models import TextAction, TextObservation, TextState

__all__ = ["GagpoEnvClient", "TextAction", "TextObservation", "TextState"]

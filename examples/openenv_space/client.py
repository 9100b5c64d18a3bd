"""OpenEnv's EnvClient for a served gagpo env (defined in gagpo.integrations.openenv.client)."""

from gagpo.integrations.openenv.client import GagpoEnvClient

__all__ = ["GagpoEnvClient"]

"""OpenEnv's EnvClient for a served gagpo env (defined in gagpo.openenv_client)."""

from gagpo.openenv_client import GagpoEnvClient

__all__ = ["GagpoEnvClient"]

"""The server of the Space: gagpo.integrations.openenv's app for the env $GAGPO_ENV."""

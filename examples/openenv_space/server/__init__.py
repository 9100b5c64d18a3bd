"""The server of the Space: gagpo.openenv_server's app for the env $GAGPO_ENV."""

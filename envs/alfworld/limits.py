"""ALFWorld-v0's episode limit, in a leaf module: the env, the engine's stock env and the
registration (``import gagpo.envs``) read it without importing each other."""

MAX_STEPS = 50
"""Episode length of ALFWorld-v0 (ALFWorld's own setting, the papers')."""

"""Importing ``envs`` registers both environments with Gymnasium, with their step limits, and
nothing else registers them: checked in a fresh interpreter, where no test could have."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json
import gymnasium as gym
ids = ("WebShop-v0", "ALFWorld-v0")
before = [i in gym.registry for i in ids]
import gagpo.envs
from gymnasium.envs.registration import load_env_creator
out = {"before": before}
for i in ids:
    spec = gym.spec(i)
    cls = load_env_creator(spec.entry_point)
    out[i] = [spec.entry_point, spec.max_episode_steps, f"{cls.__module__}.{cls.__name__}"]
print(json.dumps(out))
"""


def test_importing_envs_registers_both_ids():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["before"] == [False, False]  # registered by the import, not by gymnasium
    assert got["WebShop-v0"] == [
        "gagpo.envs.webshop.env:WebShopEnv", 15, "gagpo.envs.webshop.env.WebShopEnv"]
    assert got["ALFWorld-v0"] == [
        "gagpo.envs.alfworld.env:AlfworldEnv", 50, "gagpo.envs.alfworld.env.AlfworldEnv"]

"""Importing ``envs`` registers both environments with Gymnasium, with their step limits, and
nothing else registers them: checked in a fresh interpreter, where no test could have."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_each_episode_limit_is_read_from_its_one_constant():
    """The registration, the environment and the agent's prompts share one limit per env."""
    import gymnasium as gym

    from gagpo.agents.react import ReActAgent
    from gagpo.envs import ALFWORLD_MAX_STEPS, WEBSHOP_MAX_STEPS, probe

    for env_id, limit, name in (("WebShop-v0", WEBSHOP_MAX_STEPS, "webshop"),
                                ("ALFWorld-v0", ALFWORLD_MAX_STEPS, "alfworld")):
        assert gym.spec(env_id).max_episode_steps == limit
        assert ReActAgent(env_id).max_steps == limit == ReActAgent(name).max_steps
    assert ReActAgent("WebShop-v0", max_steps=4).max_steps == 4
    with probe("WebShop-v0") as env:
        assert env.max_steps == WEBSHOP_MAX_STEPS
    with probe("WebShop-v0", max_steps=3) as env:
        assert env.max_steps == 3


def test_split_tasks_lists_a_split_of_an_env_id():
    from gagpo.envs import probe, split_tasks

    with probe("WebShop-v0") as env:
        n = env.num_goals
        assert split_tasks("WebShop-v0") == list(env.split_tasks()) == list(range(1500, n))
    assert split_tasks("WebShop-v0", "test") == list(range(500))
    assert split_tasks("WebShop-v0", split="eval") == list(range(500, 1500))
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        split_tasks("WebShop-v0", split="dev")


def test_env_spec_finds_what_gymnasium_make_finds_and_names_what_it_does_not():
    from gagpo.envs import env_spec

    assert env_spec("WebShop-v0").max_episode_steps == 15
    assert env_spec("gagpo.envs:ALFWorld-v0").id == "ALFWorld-v0"  # "module:Id", as make does
    for missing in ("WebShop-v9", "no_such_module:WebShop-v0"):
        with pytest.raises(ValueError, match=f"^no environment '{missing}' .*; gagpo registers "
                                             "WebShop-v0 and ALFWorld-v0$"):
            env_spec(missing)

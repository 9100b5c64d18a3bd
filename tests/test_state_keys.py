"""State keys are the same in every process: a trainer compares keys that workers (other
processes, other machines) computed, so a key must not depend on the process's string-hash
seed or anything else local. Equality in both directions is tested on random walks in
tests/test_webshop_env.py and tests/test_alfworld_env.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_WALK = """
import json, sys
import gymnasium as gym
import gagpo.envs  # noqa: F401
from gagpo.envs.base import make_state_key

keys = [make_state_key("x", 1, ("a", frozenset({"b"})), None)]
env = gym.make("WebShop-v0", request_infos=("expert_action",))
obs, info = env.reset(options={"task": 3})
keys.append(info["state_key"])
for _ in range(4):
    obs, r, term, trunc, info = env.step(info["expert_action"])
    keys.append(info["state_key"])
    if term or trunc:
        break
env.close()
if len(sys.argv) > 1:
    from gagpo.envs.alfworld import available
    if available():
        env = gym.make("ALFWorld-v0")
        obs, info = env.reset(seed=0, options={"task": 0})
        keys.append(info["state_key"])
        for action in info["admissible_actions"][:3]:
            env.reset(seed=0, options={"task": 0})
            keys.append(env.step(action)[4]["state_key"])
        env.close()
print(json.dumps(keys))
"""


def _keys_in_a_fresh_process(hash_seed: str, alfworld: bool) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-c", _WALK] + (["alfworld"] if alfworld else [])
    out = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("alfworld", [False, True], ids=["webshop", "alfworld"])
def test_state_keys_are_the_same_in_every_process(alfworld):
    if alfworld:
        from gagpo.envs.alfworld import available

        if not available():
            pytest.skip("ALFWorld's engine is not installed")
    first = _keys_in_a_fresh_process("1", alfworld)
    second = _keys_in_a_fresh_process("2", alfworld)
    assert first == second
    assert len(set(first[1:])) > 2  # the walk went through different states
    assert all(len(k) == 16 and int(k, 16) >= 0 for k in first)  # short hex digests


def test_keys_are_sixteen_hex_digits_in_process_and_over_the_api():
    """The documented form (16 hex digits, 8 bytes of BLAKE2b), checked in this process too:
    tools that compare keys between mutated and original code only see what runs here."""
    import gymnasium as gym

    import gagpo.envs  # noqa: F401
    from gagpo.envs.base import make_state_key
    from gagpo.servers.webshop.observe import describe

    env = gym.make("WebShop-v0")
    _, info = env.reset(options={"task": 3})
    backend = env.unwrapped._backend  # the in-process shop and session
    served = describe(backend.shop, backend.state)["info"]["state_key"]
    for key in (make_state_key("x", 1, ("a", frozenset({"b"})), None), info["state_key"], served):
        assert re.fullmatch(r"[0-9a-f]{16}", key), key
    assert served == info["state_key"]
    env.close()


def test_both_alfworld_engines_give_the_same_keys(tmp_path):
    """The native engine derives its keys from its own fact view, the reference engine from
    TextWorld's facts: along one walk (the same commands in both) every key agrees, and the
    walk goes through several different states, some of them twice."""
    import random

    from gagpo.envs.alfworld import available

    if not available():
        pytest.skip("ALFWorld's engine is not installed")
    from gagpo.envs.alfworld.env import AlfworldEnv
    from gagpo.envs.alfworld.generator import generate_games

    generate_games(tmp_path, "train", 2, seed=5)
    envs = [AlfworldEnv(data_dir=tmp_path, engine=e) for e in ("reference", "native")]
    try:
        rng = random.Random(0)
        for task in range(2):
            infos = [e.reset(seed=0, options={"task": task})[1] for e in envs]
            keys = [infos[0]["state_key"]]
            assert infos[0]["state_key"] == infos[1]["state_key"]
            for _ in range(25):
                actions = infos[0]["admissible_actions"]
                assert actions == infos[1]["admissible_actions"]
                if not actions:
                    break
                action = rng.choice(actions)
                infos = [e.step(action)[4] for e in envs]
                assert infos[0]["state_key"] == infos[1]["state_key"], action
                keys.append(infos[0]["state_key"])
            assert 2 < len(set(keys)) < len(keys)
    finally:
        for e in envs:
            e.close()

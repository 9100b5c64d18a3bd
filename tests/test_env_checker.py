"""The env contract's checker: both real environments pass it (WebShop-v0 in-process and over
its JSON API, ALFWorld-v0), and an environment that forgets a declaration, or an info key,
fails with a message naming it."""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest

import gagpo.envs  # noqa: F401  (registers the environments)
from gagpo.envs.base import INFO_KEYS, TextEnv, TextInfo, make_state_key, task_index
from gagpo.envs.checker import ContractError, check_env

# ------------------------------------------------------------------------ the real envs


def test_webshop_passes_in_process_and_over_the_api(serve):
    env = gym.make("WebShop-v0")
    try:
        check_env(env)
        from gagpo.servers.webshop.web.app import create_app

        app = create_app(env.unwrapped._backend.shop, secret="test-secret")
        with serve(app) as url:
            remote = gym.make("WebShop-v0", server_url=url)
            try:
                check_env(remote)
            finally:
                remote.close()
    finally:
        env.close()


def test_alfworld_passes(tmp_path):
    from gagpo.envs.alfworld import available

    if not available():
        pytest.skip("alfworld/textworld not installed (pip install 'gagpo[alfworld]')")
    from gagpo.envs.alfworld.generator import generate_games

    generate_games(tmp_path, "train", 2, seed=3)
    env = gym.make("ALFWorld-v0", data_dir=str(tmp_path))
    try:
        check_env(env)
    finally:
        env.close()


# ------------------------------------------------- a tiny env, whole and with parts missing


class Plain(TextEnv):
    """Count to the task's number with ``up``: everything but the declarations."""

    split = "train"
    TASKS = {"train": range(1, 4), "test": range(4, 6)}

    @property
    def splits(self):
        return tuple(self.TASKS)

    def _reset(self, task, split):
        tasks = self.TASKS[split]
        if task is None:
            task = tasks[int(self.np_random.integers(len(tasks)))]
        self._target, self._n = task_index(task, 6, "a number 0..5"), 0
        return self._obs(), self._info(True)

    def _step(self, action):
        valid = action == "up"
        self._n += valid
        return self._obs(), float(self._won()), self._won(), self._info(valid)

    def _won(self) -> bool:
        return self._n >= self._target

    def _obs(self) -> str:
        return f"{self._n} of {self._target}"

    def _info(self, valid: bool) -> dict:
        return self.make_info(
            task_id=f"count:{self._target}", task_type="count", instruction="count",
            admissible_actions=["up"], state_key=make_state_key(self._target, self._n),
            won=self._won(), score=float(self._won()), action_valid=valid)


def _split_tasks(self, split=None):
    return self.TASKS[split or self.split]


DECLARATIONS = {"max_steps": 5, "report_label": "Counting", "split_tasks": _split_tasks}
Counter = type("Counter", (Plain,), DECLARATIONS)


def _without(name: str, **changes) -> type[TextEnv]:
    """``Counter`` with the declaration ``name`` left out and ``changes`` made."""
    body = {k: v for k, v in DECLARATIONS.items() if k != name}
    return type(f"No_{name}", (Plain,), {**body, **changes})


def test_a_whole_tiny_env_passes():
    check_env(Counter())


@pytest.mark.parametrize("missing, message", [
    ("max_steps", "max_steps is not set (the episode limit, an int > 0)"),
    ("report_label", "report_label is not set (a str: how reports name the env)"),
    ("split_tasks", "split_tasks(split) is not implemented"),
])
def test_a_forgotten_declaration_is_named(missing, message):
    with pytest.raises(ContractError) as raised:
        check_env(_without(missing)())
    assert str(raised.value) == f"No_{missing} breaks gagpo's env contract: {message}"


def test_every_forgotten_declaration_is_named_at_once():
    with pytest.raises(ContractError, match=r"max_steps is not set.*; report_label is not set"
                                            r".*; split_tasks\(split\) is not implemented"):
        check_env(Plain())


@pytest.mark.parametrize("changes, message", [
    ({"max_steps": 0}, "max_steps is 0, not an int > 0"),
    ({"max_steps": True}, "max_steps is True, not an int > 0"),
    ({"max_steps": "15"}, "max_steps is '15', not an int > 0"),
    ({"report_label": ""}, "report_label is '', not a non-empty str"),
    ({"split": "valid"}, "split is 'valid', not one of splits ['train', 'test']"),
    ({"split_tasks": lambda self, split=None: []},
     "split_tasks() lists no task of split 'train'"),
    ({"split_tasks": lambda self, split=None: iter(range(3))},
     "split_tasks() returns range_iterator, not a sequence"),
])
def test_a_wrong_declaration_is_named(changes, message):
    env = _without("nothing", **changes)()
    with pytest.raises(ContractError, match=re.escape(f": {message}") + "$"):
        check_env(env)


def _info_changed(when: str, **changes):
    """``Counter`` whose info (after reset or after a step) gets ``changes`` (None drops a
    key): as an env that builds its info by hand would."""
    def info(self, valid):
        built = Plain._info(self, valid)
        if when == "reset" or self._n > 0:
            for key, value in changes.items():
                built.pop(key) if value is None else built.__setitem__(key, value)
        return built
    return type("HandMade", (Counter,), {"_info": info})


@pytest.mark.parametrize("when, changes, message", [
    ("reset", {"task_type": None}, "reset's info has no 'task_type' (str)"),
    ("reset", {"state_key": None, "won": None},
     "reset's info has no 'state_key' (str); reset's info has no 'won' (bool)"),
    ("reset", {"score": 0}, "reset's info['score'] is int 0, not float"),
    ("reset", {"state_key": ""}, "reset's info['state_key'] is empty"),
    ("reset", {"admissible_actions": ("up",)},
     "reset's info['admissible_actions'] is tuple ('up',), not list[str]"),
    ("step", {"action_valid": np.True_},
     f"step's info['action_valid'] is numpy.{type(np.True_).__qualname__} {np.True_!r}, "
     "not bool"),
    ("step", {"task_type": 3}, "step's info['task_type'] is int 3, not str"),
])
def test_an_info_missing_a_key_or_its_type_is_named(when, changes, message):
    with pytest.raises(ContractError) as raised:
        check_env(_info_changed(when, **changes)())
    assert str(raised.value) == f"HandMade breaks gagpo's env contract: {message}"


def test_gymnasiums_checks_run_too():
    """An observation outside the observation space is Gymnasium's finding, not ours."""
    class Binary(Counter):
        def _obs(self):
            return "\x00"

    with pytest.raises(AssertionError) as raised:
        check_env(Binary())
    assert not isinstance(raised.value, ContractError)
    assert "observation" in str(raised.value)


def test_only_text_envs_are_checked():
    with pytest.raises(ContractError, match="CartPoleEnv is not a gagpo.envs.base.TextEnv"):
        check_env(gym.make("CartPole-v1"))


# ------------------------------------------------------------------ the info's one key list


def test_make_info_names_the_missing_contract_keys():
    with pytest.raises(TypeError, match=r"misses the contract's info keys \['task_type'\]"):
        TextEnv.make_info(task_id="t", instruction="i", admissible_actions=[], state_key="k",
                          won=False, score=0.0)


def test_make_info_orders_and_converts_the_contract_keys():
    info = TextEnv.make_info(page="p", score=np.float32(0.5), won=np.True_, task_type="t",
                             state_key="k", admissible_actions=["a"], instruction="i",
                             task_id="x")
    assert list(info) == [*INFO_KEYS, "page"]
    assert list(INFO_KEYS) == list(TextInfo.__annotations__)
    assert type(info["won"]) is bool and type(info["score"]) is float
    assert info["action_valid"] is True and info["score"] == 0.5

"""ALFWorld-v0 on the reference engine: the reset text, the expert on all six task types, state
keys from facts, the env checker, invalid commands, the loader of the official layout and the
generator's determinism. Uses a small generated set made once per module (no download)."""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import pytest

from gagpo.envs.alfworld import available

pytestmark = pytest.mark.skipif(
    not available(), reason="alfworld/textworld not installed (pip install 'gagpo[alfworld]')"
)

TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    from gagpo.envs.alfworld.generator import generate_games

    root = tmp_path_factory.mktemp("alfworld")
    generate_games(root, "train", 6, seed=11)  # one game of each task type
    generate_games(root, "valid_unseen", 2, seed=11)
    return root


@pytest.fixture(scope="module")
def env(data_dir):
    from gagpo.envs.alfworld.env import AlfworldEnv

    e = AlfworldEnv(data_dir=data_dir)
    yield e
    e.close()


def _index_of(env, task_type: str) -> int:
    return next(i for i, g in enumerate(env.games()) if g.task_type == task_type)


RESET_TEXT = re.compile(
    r"-= Welcome to TextWorld, ALFRED! =-\n\n"
    r"You are in the middle of a room\. Looking quickly around you, you see "
    r"(a [a-z]+ \d+, )+and a [a-z]+ \d+\.\n\n"
    r"Your task is to: [a-z ]+\.\Z"
)


def test_reset_text_has_the_original_shape(env):
    from gagpo.envs.base import check_info

    for i in range(len(env.games())):
        obs, info = env.reset(options={"task": i})
        check_info(info)
        assert RESET_TEXT.match(obs), obs
        assert info["instruction"] == obs.split("\n\n")[-1]
        assert info["task_id"] == env.games()[i].task_id and info["task_id"].startswith("train/")
        assert info["score"] == 0.0 and not info["won"] and info["action_valid"]
        assert "help" not in info["admissible_actions"]
        assert "look" in info["admissible_actions"] and "inventory" in info["admissible_actions"]
        assert info["dataset"] == "ALFWorld-style (generated games)"


@pytest.mark.parametrize("task_type", TYPES)
def test_expert_wins_each_task_type(env, task_type):
    i = _index_of(env, task_type)
    obs, info = env.reset(options={"task": i})
    assert info["task_type"] == task_type
    for _ in range(50):
        obs, reward, terminated, truncated, info = env.step(env.expert_action())
        assert info["action_valid"]
        if terminated:
            break
    assert terminated and info["won"] and reward == 1.0 and info["score"] == 1.0
    # The stored walkthrough (the planner's plan, checked at generation) wins too.
    env.reset(options={"task": i})
    for command in env.walkthrough():
        _, reward, terminated, _, info = env.step(command)
    assert terminated and info["won"]


@pytest.mark.parametrize("task_type", ["pick_two_obj_and_place", "pick_heat_then_place_in_recep"])
def test_expert_wins_from_states_reached_at_random(env, task_type):
    i = _index_of(env, task_type)
    rng = random.Random(3)
    for trial in range(3):
        env.reset(options={"task": i})
        for _ in range(8 + 4 * trial):  # wander, pick things up, open things
            _, _, terminated, _, info = env.step(rng.choice(info_actions(env)))
            if terminated:
                break
        steps = 0
        while not terminated:
            _, _, terminated, _, info = env.step(env.expert_action())
            steps += 1
            assert steps < 40
        assert info["won"]


def info_actions(env) -> list[str]:
    return [c for c in env._infos["admissible_commands"] if c != "help"]


def test_invalid_and_malformed_commands_get_the_engine_feedback(env):
    _, info = env.reset(options={"task": 0})
    key = info["state_key"]
    for bad in ["fly to the moon", "", "take", "go to nowhere 7", "open fridge 99"]:
        obs, reward, terminated, truncated, info = env.step(bad)
        assert obs == "Nothing happens." and reward == 0.0 and not terminated
        assert info["action_valid"] is False and info["feedback"] == "Nothing happens."
        assert info["state_key"] == key  # nothing changed
    obs, _, _, _, info = env.step(info["admissible_actions"][0])
    assert info["action_valid"] is True and obs != "Nothing happens."
    obs, _, _, _, info = env.step("help")  # the engine's command, kept out of the list
    assert info["action_valid"] and obs.lstrip().startswith("Available commands:")


def test_state_key_comes_from_the_world_not_the_text(env):
    _, info = env.reset(options={"task": 0})
    gotos = [a for a in info["admissible_actions"] if a.startswith("go to ")]
    keys = []
    for target in gotos[:2]:  # two different places, then an invalid command in each
        env.reset(options={"task": 0})
        env.step(target)
        obs, _, _, _, info = env.step("xyzzy")
        assert obs == "Nothing happens."
        keys.append(info["state_key"])
    assert keys[0] != keys[1]

    # One state reached by two paths: open-then-close and look/examine leave the world as it
    # was (only the engine's "checked" bookkeeping differs), so the key is the same.
    for game in range(len(env.games())):
        env.reset(options={"task": game})
        openable = _first_openable(env)
        if openable:
            break
    assert openable, "no generated game has an openable receptacle"
    env.step(f"go to {openable}")
    _, _, _, _, direct = env.step("inventory")
    env.reset(options={"task": game})
    env.step(f"go to {openable}")
    obs_open = env.step(f"open {openable}")[0]
    env.step(f"close {openable}")
    env.step("look")
    _, _, _, _, roundabout = env.step(f"examine {openable}")
    assert obs_open != direct["feedback"]
    assert roundabout["state_key"] == direct["state_key"]
    # ... while an open receptacle is a different state.
    _, _, _, _, opened = env.step(f"open {openable}")
    assert opened["state_key"] != direct["state_key"]


def _first_openable(env) -> str | None:
    names = sorted(f.arguments[0].name for f in env.facts if f.name == "openable")
    return names[0] if names else None


def test_same_task_and_seed_give_the_same_start_and_key(env):
    obs1, info1 = env.reset(seed=5, options={"task": 2})
    obs2, info2 = env.reset(seed=5, options={"task": info1["task_id"]})
    assert obs1 == obs2 and info1["state_key"] == info2["state_key"]
    _, other = env.reset(options={"task": 3})
    assert other["state_key"] != info1["state_key"]


def test_gymnasium_make_env_checker_and_step_limit(data_dir):
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    import gagpo.envs  # noqa: F401

    e = gym.make("ALFWorld-v0", data_dir=str(data_dir), split="valid_unseen")
    check_env(e.unwrapped, skip_render_check=True)
    obs, info = e.reset(seed=0)
    assert info["split"] == "valid_unseen" and info["task_id"].startswith("valid_unseen/")
    truncations = []
    for _ in range(50):
        _, _, terminated, truncated, _ = e.step("look")
        assert not terminated
        truncations.append(truncated)
    assert truncations == [False] * 49 + [True]
    e.close()


def test_loader_reads_a_folder_in_the_official_layout(data_dir, tmp_path):
    from gagpo.envs.alfworld.env import AlfworldEnv
    from gagpo.envs.alfworld.games import GameSource

    src = GameSource(data_dir)
    games = src.games("train")
    root = tmp_path / "alfworld_data" / "json_2.1.1"
    layout = {"train": games[:3], "valid_seen": games[3:4], "valid_unseen": games[4:6]}
    for split, chosen in layout.items():
        for g in chosen:
            dest = root / split / Path(g.task_id).relative_to(g.split)
            shutil.copytree(g.path.parent, dest)
            traj = json.loads((dest / "traj_data.json").read_text())
            traj.pop("generator")  # as an official traj_data.json
            (dest / "traj_data.json").write_text(json.dumps(traj))
    # What the official loader skips: unsolvable games, movable/sliced tasks, missing files.
    skipped = root / "train"
    first = skipped / Path(games[0].task_id).relative_to("train")
    for name in ("pick_and_place_with_movable_recep-Apple-Bowl-Fridge-1", "x-Sliced-1"):
        shutil.copytree(first, skipped / name / "trial_1")
    unsolvable = skipped / "pick_and_place_simple-Pen-None-Desk-301" / "trial_2"
    shutil.copytree(first, unsolvable)
    data = json.loads((unsolvable / "game.tw-pddl").read_text())
    (unsolvable / "game.tw-pddl").write_text(json.dumps({**data, "solvable": False}))
    shutil.copytree(first, skipped / "pick_and_place_simple-Pen-None-Desk-302" / "trial_3")
    (skipped / "pick_and_place_simple-Pen-None-Desk-302" / "trial_3" / "game.tw-pddl").unlink()

    official = GameSource(tmp_path / "alfworld_data")  # the folder holding json_2.1.1
    assert official.splits() == ["train", "valid_seen", "valid_unseen"]
    assert [len(official.games(s)) for s in official.splits()] == [3, 1, 2]
    ids = [g.task_id for g in official.games("train")]
    assert ids == sorted(ids) and all(i.startswith("train/") for i in ids)
    assert official.label == "ALFWorld (official games)"

    e = AlfworldEnv(data_dir=root, split="valid_unseen")  # json_2.1.1 itself works too
    obs, info = e.reset(options={"task": 1})
    assert info["task_id"] == official.games("valid_unseen")[1].task_id
    assert info["dataset"] == "ALFWorld (official games)" and obs.startswith("-= Welcome")
    with pytest.raises(ValueError):
        e.reset(options={"split": "nope"})


def test_generator_is_deterministic_and_uses_held_out_scenes():
    from gagpo.envs.alfworld.generator import knowledge, sample_game

    a = sample_game("valid_unseen", 4, seed=3)
    b = sample_game("valid_unseen", 4, seed=3)
    assert a.problem == b.problem and a.task == b.task and a.traj_data == b.traj_data
    assert sample_game("valid_unseen", 4, seed=4).problem != a.problem
    held_out = set(knowledge().constants.TEST_SCENE_NUMBERS)
    for i in range(12):
        assert sample_game("valid_unseen", i).scene in held_out
        assert sample_game("train", i).scene not in held_out
    data = a.game_json()
    assert "UNKNOWN GOAL" not in data["grammar"] and a.task.text in data["grammar"]
    assert {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"} <= set(data)


def test_default_set_is_generated_once_into_the_cache(tmp_path, monkeypatch):
    from gagpo.envs.alfworld.games import GameSource, default_generated_dir, open_source

    monkeypatch.setenv("GAGPO_CACHE", str(tmp_path))
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    sizes = {"train": 1, "valid_seen": 1, "valid_unseen": 1}
    first = default_generated_dir(sizes=sizes)
    assert first.parent == tmp_path / "alfworld"
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temporary left over
    src = GameSource(first)
    assert src.splits() == ["train", "valid_seen", "valid_unseen"] and src.generated
    stamp = src.games("train")[0].path.stat().st_mtime_ns
    assert default_generated_dir(sizes=sizes) == first  # cached: not generated again
    assert src.games("train")[0].path.stat().st_mtime_ns == stamp
    # $ALFWORLD_DATA wins when it holds official-layout data.
    monkeypatch.setenv("ALFWORLD_DATA", str(first))
    assert open_source().root == first / "json_2.1.1"


# -- the edges of an episode: after the win or the truncation, bad reset arguments, step
# before reset / after close.


def _expert_plan(env, i: int) -> list[str]:
    """The expert's winning commands for game ``i`` (played on ``env``)."""
    env.reset(options={"task": i})
    plan, terminated = [], False
    while not terminated:
        plan.append(env.expert_action())
        _, _, terminated, _, _ = env.step(plan[-1])
        assert len(plan) < 40
    return plan


def _assert_after_end(step, before, terminated, truncated):
    """A step after the episode's end: nothing changes, nothing is paid, reset() is named."""
    from gagpo.envs.base import check_info

    obs, reward, term, trunc, info = step
    check_info(info)
    assert (reward, term, trunc) == (0.0, terminated, truncated)
    assert info["action_valid"] is False and obs == info["feedback"] and "reset()" in obs
    assert info["won"] == before["won"] and info["score"] == before["score"]
    assert info["state_key"] == before["state_key"] and info["admissible_actions"] == []
    assert info["task_id"] == before["task_id"]


def test_steps_after_a_win_change_nothing_and_pay_nothing(env):
    i = _index_of(env, "pick_and_place_simple")
    plan = _expert_plan(env, i)
    env.reset(options={"task": i})
    for command in plan:
        _, reward, terminated, truncated, info = env.step(command)
    assert terminated and not truncated and reward == 1.0 and info["won"]
    for command in ["look", "inventory", plan[-1], "fly to the moon"]:
        _assert_after_end(env.step(command), info, terminated=True, truncated=False)
    _, info = env.reset(options={"task": i})  # a reset starts afresh
    assert not info["won"] and env.step(plan[0])[4]["action_valid"]


def test_a_truncated_episode_cannot_win(env, data_dir):
    from gagpo.envs.alfworld.env import AlfworldEnv

    i = _index_of(env, "pick_and_place_simple")
    plan = _expert_plan(env, i)
    assert len(plan) >= 2
    e = AlfworldEnv(data_dir=data_dir, max_steps=len(plan) - 1, request_infos=["expert_action"])
    e.reset(options={"task": i})
    for t, command in enumerate(plan[:-1]):
        _, _, terminated, truncated, info = e.step(command)
        assert not terminated and truncated == (t == len(plan) - 2)
    step = e.step(plan[-1])  # the winning command, one step too late
    _assert_after_end(step, info, terminated=False, truncated=True)
    assert step[4]["won"] is False and step[4]["expert_action"] is None
    e.close()


@pytest.mark.parametrize("wrapped", [False, True], ids=["env", "gym.make"])
def test_a_win_on_the_last_allowed_step_is_paid_and_terminated(env, data_dir, wrapped):
    """The step limit does not swallow a win on the last allowed step: it pays 1 and the
    episode is terminated, not truncated. Gymnasium's TimeLimit (``gym.make``) flags
    ``truncated`` on every step that reaches ``max_episode_steps``, this one too; ``terminated``
    and the reward are the env's."""
    import gymnasium as gym

    import gagpo.envs  # noqa: F401
    from gagpo.envs.alfworld.env import AlfworldEnv

    i = _index_of(env, "pick_and_place_simple")
    plan = _expert_plan(env, i)  # won with room to spare (50 steps)
    assert len(plan) >= 2
    n = len(plan)
    e = (gym.make("ALFWorld-v0", data_dir=str(data_dir), max_steps=n, max_episode_steps=n)
         if wrapped else AlfworldEnv(data_dir=data_dir, max_steps=n))
    e.reset(options={"task": i})
    for command in plan[:-1]:
        assert e.step(command)[1:4] == (0.0, False, False)
    _, reward, terminated, truncated, info = e.step(plan[-1])  # the win, on the last step
    assert (reward, terminated, truncated) == (1.0, True, wrapped)
    assert info["won"] is True and info["score"] == 1.0
    for command in ["look", plan[-1]]:  # then the end, as after any end
        _assert_after_end(e.step(command), info, terminated=True, truncated=wrapped)
    e.close()


ACCEPTS = (r"options\['task'\] .*a game index \(int\) into the split's games sorted by path, "
           r"or a task id '<split>/<task folder>/<trial folder>'")


@pytest.mark.parametrize("options, error, match", [
    ({"task": float("inf")}, TypeError, ACCEPTS),
    ({"task": True}, TypeError, ACCEPTS),
    ({"task": 1.7}, TypeError, ACCEPTS),
    ({"task": b"1"}, TypeError, ACCEPTS),
    ({"task": [1]}, TypeError, ACCEPTS),
    ({"task": "abc"}, ValueError, ACCEPTS + r".*no game has the id 'abc'"),
    ({"task": "1"}, ValueError, ACCEPTS),
    ({"task": -1}, ValueError, r"options\['task'\] = -1 is out of range 0\.\.5"),
    ({"task": 6}, ValueError, r"options\['task'\] = 6 is out of range 0\.\.5: .*'train'"),
    ("x", TypeError, r"options must be a dict"),
    ({"taks": 0}, ValueError, r"unknown reset option.*taks"),
    ({"split": 5}, TypeError, r"options\['split'\] must be a split name.*'valid_unseen'"),
    ({"split": "nope"}, ValueError, r"options\['split'\] must be one of"),
])
def test_bad_reset_arguments_are_clear_errors(env, options, error, match):
    with pytest.raises(error, match=match):
        env.reset(options=options)


def test_reset_accepts_indices_numpy_integers_and_task_ids(env, data_dir):
    import numpy as np

    from gagpo.envs.alfworld.env import AlfworldEnv

    _, info = env.reset(options={"task": 1})
    for task in [np.int64(1), np.int32(1), info["task_id"]]:
        assert env.reset(options={"task": task})[1]["task_id"] == info["task_id"]
    _, other = env.reset(options={"task": 1, "split": "valid_unseen"})
    assert other["task_id"] == env.games("valid_unseen")[1].task_id
    with pytest.raises(TypeError, match=r"split must be a split name"):
        AlfworldEnv(data_dir=data_dir, split=5)
    with pytest.raises(ValueError, match=r"^max_steps must be >= 1, not 0$"):
        AlfworldEnv(data_dir=data_dir, max_steps=0)
    with pytest.raises(ValueError) as huge:  # a refused value is quoted, not echoed whole
        AlfworldEnv(data_dir=data_dir, max_steps="x" * 1_000_000)
    assert str(huge.value) == f"max_steps must be an integer, not '{'x' * 59}..."


def test_step_before_reset_and_after_close_are_clear_errors(data_dir):
    from gagpo.envs.alfworld.env import AlfworldEnv

    e = AlfworldEnv(data_dir=data_dir)
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
        e.step("look")
    e.reset(options={"task": 0})
    e.close()
    with pytest.raises(RuntimeError, match=r"closed.*reset\(\)"):
        e.step("look")
    e.reset(options={"task": 0})  # a reset after close starts a new episode
    assert e.step("look")[4]["action_valid"]
    e.close()


def _whole_state(env) -> frozenset:
    """Every fact the engine holds, static ones included, but its bookkeeping: ``checked``
    (set by look, examine and open; nothing reads it) and the ``not_*`` facts TextWorld keeps
    as records of delete effects (going A, B, A holds one more than going A: the same world,
    with the same commands)."""
    return frozenset((f.name.lower(), *(v.name for v in f.arguments)) for f in env.facts
                     if f.name.lower() != "checked" and not f.name.lower().startswith("not_"))


# Commands the engine refuses ("Nothing happens."), mixed into the walks.
REFUSED = ["xyzzy", "take", "go to nowhere 7", "clean", "heat it", "open fridge 99"]


@pytest.mark.parametrize("task_type, changes", [
    ("pick_clean_then_place_in_recep", {"isclean", "opened", "atlocation"}),
    ("pick_heat_then_place_in_recep", {"ishot", "atlocation"}),
    ("pick_cool_then_place_in_recep", {"iscool", "atlocation"}),
    ("look_at_obj_in_light", {"istoggled", "atlocation"}),
])
def test_equal_state_keys_exactly_when_the_engine_states_are_equal(env, data_dir, task_type,
                                                                    changes):
    """Both directions, on seeded walks by two copies of one task (the expert's commands,
    random admissible ones, refused ones; a new episode after each win): equal keys exactly
    when the engine's whole states are equal, and equal keys mean the same commands and the
    same ``won``. The walks clean, heat, cool, toggle and open: states one fact apart, which
    a key missing that predicate would merge."""
    from gagpo.envs.alfworld.env import AlfworldEnv

    copies = [env, AlfworldEnv(data_dir=data_dir)]
    i = _index_of(env, task_type)
    rng = random.Random(0)
    seen = []
    try:
        for walk in range(4):
            e = copies[walk % 2]
            _, info = e.reset(options={"task": i})
            seen.append((info["state_key"], _whole_state(e), info["admissible_actions"], False))
            for _ in range(30):
                r = rng.random()
                command = (e.expert_action() if r < 0.5 else rng.choice(REFUSED) if r < 0.6
                           else rng.choice(info["admissible_actions"]))
                _, _, terminated, _, info = e.step(command)
                seen.append((info["state_key"], _whole_state(e), info["admissible_actions"],
                             info["won"]))
                if terminated:
                    break
    finally:
        copies[1].close()

    key_of, state_of = {}, {}
    for key, whole, commands, won in seen:
        assert key_of.setdefault(whole, key) == key  # equal states, equal keys
        first = state_of.setdefault(key, (whole, commands, won))
        assert first[0] == whole, sorted(first[0] ^ whole)  # equal keys, equal states
        if not (won or first[2]):  # a won episode lists no command
            assert first[1] == commands  # ... hence the same commands

    assert any(won for *_, won in seen)
    assert len(seen) > 1.5 * len(key_of)  # the walks met: one state reached by several paths
    states = list(key_of)
    apart = {next(iter(a ^ b))[0] for a in states for b in states
             if a != b and len({fact[0] for fact in a ^ b}) == 1}
    assert changes <= apart, apart


def _spellings(command: str) -> list[str]:
    """Other spellings of a command: some the engine takes (it strips the ends), some it does
    not (inner spaces, case, punctuation)."""
    return [command, f"  {command}  ", f"{command}\n", f"\t{command}", f" {command}\r\n",
            command.replace(" ", "  "), command.replace(" ", "\t"), command.upper(),
            command.capitalize(), f"{command}.", f"{command} please"]


@pytest.mark.parametrize("engine", ["reference", "native"])
def test_action_valid_says_whether_the_engine_took_the_command_whatever_its_spelling(
        data_dir, engine):
    """``action_valid`` is True exactly when the engine did what the command says: each
    spelling, played from the start, is compared with the command as listed played on a fresh
    env (same text, same state) and with a rejected one ("Nothing happens.", state unchanged)."""
    from gagpo.envs.alfworld.env import AlfworldEnv

    env, fresh = AlfworldEnv(data_dir=data_dir, engine=engine), AlfworldEnv(
        data_dir=data_dir, engine=engine)
    _, info = fresh.reset(seed=0, options={"task": 0})
    start = info["state_key"]
    commands = [info["admissible_actions"][0], "look", "help"]
    kinds = {True: 0, False: 0}
    for command in commands:
        fresh.reset(seed=0, options={"task": 0})
        want_obs, _, _, _, want = fresh.step(command)
        assert want["action_valid"] and want_obs != "Nothing happens."
        for spelled in _spellings(command):
            env.reset(seed=0, options={"task": 0})
            obs, _, _, _, info = env.step(spelled)
            took = (obs, info["state_key"]) == (want_obs, want["state_key"])
            rejected = (obs, info["state_key"]) == ("Nothing happens.", start)
            assert took != rejected, (command, spelled)  # the engine did one or the other
            assert info["action_valid"] is took, (engine, spelled)
            kinds[took] += 1
    assert kinds[True] > len(commands) and kinds[False] > 0  # both kinds of other spelling
    env.close()
    fresh.close()

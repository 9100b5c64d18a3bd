"""The default ALFWorld games ship with the package (envs/alfworld/default_set.py).

- the archive is small, complete (every task type in every split) and carries ALFWorld's
  licence notice, and pyproject ships both;
- in a process where textworld, tatsu and fast_downward cannot be imported and alfworld is
  never imported (``pip install gagpo`` and ``pip install --no-deps alfworld``: no compiler),
  ``gym.make("ALFWorld-v0")`` unpacks the default set, reading only ALFWorld's domain and
  grammar files from its wheel, and every shipped game's walkthrough wins on it; without the
  wheel it says how to get it; where the reference engine is installed, it gives the same
  first observations on those games;
- where the generator's planner is installed, the shipped games are byte for byte those it
  generates (a sample; ``python -m gagpo.envs.alfworld.default_set check`` compares all).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gagpo.envs.alfworld import available, default_set
from gagpo.envs.alfworld.games import DEFAULT_SEED, DEFAULT_SIZES, GameSource
from gagpo.envs.alfworld.generator import SPLITS, TASK_TYPES, write_trial

ROOT = Path(__file__).resolve().parents[1]


def test_the_shipped_set_is_small_complete_and_carries_alfworlds_licence():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    assert default_set.ARCHIVE.stat().st_size < 1_000_000
    assert default_set.shipped_sizes() == DEFAULT_SIZES
    assert default_set.shipped_seed() == DEFAULT_SEED
    for split in SPLITS:
        types = [default_set.trial_files(split, i)[2]["task_type"]
                 for i in range(DEFAULT_SIZES[split])]
        assert types == [TASK_TYPES[i % 6] for i in range(DEFAULT_SIZES[split])]
    notice = (default_set.ARCHIVE.parent / "NOTICE").read_text()
    assert "MIT License" in notice and "Copyright (c) 2020 Mohit Shridhar and others" in notice
    assert "alfworld/data/alfred.pddl" in notice and "alfworld/data/alfred.twl2" in notice
    # ALFWorld's own files are not shipped: the archive holds their hashes only.
    import gzip

    raw = gzip.decompress(default_set.ARCHIVE.read_bytes()).decode()
    data = json.loads(raw)
    assert "pddl_domain" not in data and "grammar" not in data
    assert "(define (domain" not in raw and "#Grammar" not in raw.split('"splits"')[0]
    assert len(data["domain_sha256"]) == len(data["grammar_sha256"]) == 64
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "gagpo.envs.alfworld.data" in setuptools["packages"]
    shipped = setuptools["package-data"]["gagpo.envs.alfworld.data"]
    assert sorted(shipped) == sorted(p.name for p in default_set.ARCHIVE.parent.iterdir()
                                     if p.name != "__pycache__")


_PLAIN_INSTALL = r"""
import json, os, sys

BLOCKED = ("textworld", "tatsu", "fast_downward")
for name in BLOCKED:  # as if not installed: imports fail, find_spec says None
    sys.modules[name] = None


class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"blocked: {name}")
        return None


sys.meta_path.insert(0, Block())
import gymnasium as gym
import gagpo.envs  # noqa: F401
from gagpo.envs.alfworld import available
from gagpo.envs.alfworld.engine import AlfworldMissing
from gagpo.envs.alfworld.games import default_generated_dir

assert not available()
out = {"first": {}, "won": 0, "games": 0}
for split in ("train", "valid_seen", "valid_unseen"):
    env = gym.make("ALFWorld-v0", split=split)
    out["root"] = str(env.unwrapped.source.root)
    for i in env.unwrapped.split_tasks():
        obs, info = env.reset(options={"task": i})
        if i == 0:
            out["first"][info["task_id"]] = obs
        for command in env.unwrapped.walkthrough():
            obs, reward, terminated, truncated, info = env.step(command)
        out["games"] += 1
        out["won"] += bool(terminated and info["won"] and reward == 1.0)
    env.close()
# A smaller set is the shipped set's first games; a larger one needs the planner.
small = default_generated_dir(sizes={"train": 2, "valid_seen": 1, "valid_unseen": 1})
out["small"] = str(small)
try:
    default_generated_dir(sizes={"train": 49, "valid_seen": 24, "valid_unseen": 24})
except AlfworldMissing as e:
    out["larger"] = str(e)
out["loaded"] = sorted(m for m in sys.modules if m.split(".")[0] in (*BLOCKED, "alfworld")
                      and sys.modules[m])
out["cache"] = sorted(os.listdir(os.path.join(os.environ["GAGPO_CACHE"], "alfworld")))
print(json.dumps(out))
"""


_NO_WHEEL = r"""
import json, sys
sys.modules["alfworld"] = None  # not installed: find_spec says None
import gymnasium as gym
import gagpo.envs  # noqa: F401
from gagpo.envs.alfworld.engine import AlfworldMissing
try:
    env = gym.make("ALFWorld-v0", request_infos=["expert_action"])
    obs, info = env.reset(seed=0)
    while True:
        obs, r, term, trunc, info = env.step(info["expert_action"])
        if term or trunc:
            break
    print(json.dumps({"won": info["won"]}))
except AlfworldMissing as e:
    print(json.dumps({"error": str(e)}))
"""


def _without_alfworld(tmp_path, **env_vars) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"}
    env.update(GAGPO_CACHE=str(tmp_path), PYTHONPATH=str(ROOT), **env_vars)
    done = subprocess.run([sys.executable, "-c", _NO_WHEEL], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_without_alfworld_installed_the_default_games_fetch_its_two_files_once(tmp_path):
    """A plain ``pip install gagpo``: no ``alfworld`` package. The first ``gym.make`` has
    pip download ALFWorld 0.4.2's wheel (pure Python, not installed), takes its domain and
    grammar into the cache, checks their hashes and plays; the next process reads the cache
    and runs no pip."""
    first, said = _without_alfworld(tmp_path)
    assert first == {"won": True}, first
    assert "fetching alfworld==0.4.2's data/alfred.pddl, data/alfred.twl2 with pip" in said
    cached = tmp_path / "wheel-files" / "alfworld-0.4.2" / "data"
    assert sorted(p.name for p in cached.iterdir()) == ["alfred.pddl", "alfred.twl2"]
    # The next process: the cache alone, so no pip even where it could not download.
    again, said = _without_alfworld(tmp_path, PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1",
                                    PIP_FIND_LINKS=str(tmp_path / "nowhere"))
    assert again == {"won": True} and "fetching" not in said


def test_offline_without_alfworld_the_default_games_say_how_to_get_it(tmp_path):
    """pip cannot download (no index, no links: an offline machine, by pip's own settings):
    a clear error that names the manual step, no traceback."""
    out, _ = _without_alfworld(tmp_path, PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1",
                               PIP_FIND_LINKS=str(tmp_path / "nowhere"))
    assert "pip could not download alfworld==0.4.2's wheel" in out["error"], out
    assert "Offline, install it by hand: pip install --no-deps alfworld==0.4.2" in out["error"]
    assert not (tmp_path / "wheel-files" / "alfworld-0.4.2").exists()  # nothing half-made


def test_default_games_play_without_textworld_or_the_planner(tmp_path):
    """``pip install gagpo`` and ALFWorld's wheel without its dependencies: the default set
    unpacks from the package and every game's walkthrough wins, with the reference packages
    unimportable and alfworld never imported; the reference engine, where installed, gives the
    same first observations on the unpacked games."""
    env = {k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"}
    env.update(GAGPO_CACHE=str(tmp_path), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", _PLAIN_INSTALL], capture_output=True,
                          text=True, cwd=tmp_path, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["games"] == sum(DEFAULT_SIZES.values()) == out["won"]
    assert out["loaded"] == []
    assert "pip install 'gagpo[alfworld]'" in out["larger"]
    assert out["cache"] == ["generated-v1-seed0-train2-valid_seen1-valid_unseen1",
                            "generated-v1-seed0-train48-valid_seen24-valid_unseen24"]
    source = GameSource(out["root"])
    assert source.generated
    small = {"train": 2, "valid_seen": 1, "valid_unseen": 1}
    assert default_set.unpack(tmp_path / "small", small) == small
    assert default_set.read_tree(out["small"]) == default_set.read_tree(tmp_path / "small")
    shipped = default_set.read_tree(Path(out["root"]).parent)
    with_all = tmp_path / "all"
    default_set.unpack(with_all)
    assert shipped == default_set.read_tree(with_all)
    first = {g.task_id: g for s in SPLITS for g in source.games(s)[:1]}
    assert set(out["first"]) == set(first)
    if not available():
        return
    from gagpo.envs.alfworld.env import AlfworldEnv

    reference = AlfworldEnv(data_dir=out["root"], engine="reference")
    for task_id, obs in out["first"].items():
        got, info = reference.reset(options={"task": task_id})
        assert got == obs
        for command in first[task_id].walkthrough():
            got, reward, terminated, _, info = reference.step(command)
        assert terminated and info["won"] and reward == 1.0
    reference.close()


# Games compared with the generator: the first of each task type in every split, and one late
# game of each split.
SAMPLE = {"train": [*range(6), 47], "valid_seen": [*range(6), 23], "valid_unseen": [*range(6), 13]}


@pytest.mark.skipif(not available(), reason="the generator's planner needs gagpo[alfworld]")
@pytest.mark.parametrize("split", SPLITS)
def test_shipped_games_are_the_generators_byte_for_byte(split, tmp_path):
    from gagpo.envs.alfworld.generator import generate_games

    generated, shipped = tmp_path / "generated", tmp_path / "shipped"
    for i in SAMPLE[split]:
        generate_games(generated, split, 1, seed=default_set.shipped_seed(), start=i)
        folder, problem, traj, content = default_set.trial_files(split, i)
        write_trial(shipped / "json_2.1.1" / split / folder, problem, traj, content)
    want = default_set.read_tree(generated)
    assert len(want) == 3 * len(SAMPLE[split])
    assert default_set.read_tree(shipped) == want

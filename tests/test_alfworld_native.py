"""The native ALFWorld engine against the reference engine, and its readers' errors.

- a CI sample of the differential harness (``tools.alfworld_diff``): every task type and
  every command kind, both engines side by side, no mismatch;
- the grammar's symbol and query notations read exactly as the reference's parsers read them
  (random strings), and the demangler names as ALFWorld's;
- ALFWorld-v0 with ``engine="native"`` gives the reference's observations, commands, state keys
  and rewards, and the expert wins on it;
- a game file the native engine cannot read is a clear error naming the file and the part, and
  the env then plays that game on the reference engine with a warning at reset.
"""

from __future__ import annotations

import io
import json
import random
import warnings
from pathlib import Path

import pytest

pytest.importorskip("textworld")
pytest.importorskip("alfworld")

from gagpo.envs.alfworld.generator import TASK_TYPES  # noqa: E402
from gagpo.envs.alfworld.native import (  # noqa: E402
    GameFileError,
    NativeEnv,
    csg,  # noqa: E402
    load_game,
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """One game of each task type in train (seed 5: its kitchens hold knives and things to
    slice) and two in valid_unseen."""
    from gagpo.envs.alfworld.generator import generate_games

    root = tmp_path_factory.mktemp("alfworld_native")
    generate_games(root, "train", 6, seed=5)
    generate_games(root, "valid_unseen", 2, seed=5)
    return root


@pytest.fixture(scope="module")
def one_game(data_dir: Path) -> Path:
    return sorted((data_dir / "json_2.1.1" / "train").rglob("game.tw-pddl"))[0]


# -- the differential harness's CI sample --------------------------------------------------------


def test_diff_sample_every_task_type_and_command_kind(data_dir: Path) -> None:
    from tools import alfworld_diff

    out = io.StringIO()
    summary = alfworld_diff.run(games=8, steps=70, data_dir=str(data_dir), seed=1, out=out)
    assert summary["mismatches"] == 0, out.getvalue()[:5000]
    assert set(summary["per_task_type"]) == set(TASK_TYPES)
    assert summary["kinds_missing"] == [], summary["command_kinds"]
    for kind in ("invalid", "near miss", "malformed", "missing object", "after the win"):
        assert summary["command_kinds"].get(kind, 0) > 0, kind
    assert summary["steps"] >= 8 * 70


def test_diff_with_rewritten_grammars(data_dir: Path) -> None:
    """Both engines derive their text from the game's grammar: rewritten wordings, separators,
    templates and rules still match."""
    from tools import alfworld_diff

    out = io.StringIO()
    summary = alfworld_diff.run(
        games=2, steps=40, data_dir=str(data_dir), seed=2, variants=True, out=out
    )
    assert summary["grammar_variant_plays"] == 8
    assert summary["mismatches"] == 0, out.getvalue()[:5000]


def test_diff_reports_a_mismatch(data_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """The harness sees a difference (here a native engine that answers one command wrongly)
    and exits with 1."""
    from gagpo.envs.alfworld.native import play
    from tools import alfworld_diff

    real = play.NativeEnv.step

    def wrong(self, command):
        obs, score, done, infos = real(self, command)
        return (obs + "!" if command == "look" else obs), score, done, infos

    monkeypatch.setattr(play.NativeEnv, "step", wrong)
    out = io.StringIO()
    summary = alfworld_diff.run(games=1, steps=30, data_dir=str(data_dir), seed=3, out=out)
    assert summary["mismatches"] > 0
    assert "command 'look'" in out.getvalue() and "observation" in out.getvalue()


# -- the notations, read as the reference reads them ----------------------------------------------


def _reference_symbols(text: str):
    from textworld.envs.pddl import textgen as tg

    def one(s):
        if isinstance(s, tg.TerminalSymbol):
            return ("text", s.symbol)
        if isinstance(s, tg.NonterminalSymbol):
            return ("nt", s.symbol)
        if isinstance(s, tg.EvalSymbol):
            return ("eval", s.expression)
        if isinstance(s, tg.ConditionalSymbol):
            return ("cond", one(s.expression), s.given)
        return ("list", one(s.symbol))

    return [one(s) for s in tg._parse_and_convert(text, rule_name="symbols")]


def _native_symbols(text: str):
    """The parse before expressions are compiled (random text is rarely Python)."""

    def one(node):
        if node[0] == "cond":
            return ("cond", one(node[1]), node[2])
        if node[0] == "list":
            return ("list", one(node[1]))
        return node

    return [one(n) for n in csg._SymbolParser(text).symbols()]


PIECES = ["a", "b", " ", "\t", "\n", "#", "{", "}", "[", "]", "|", '"', "<", ">", ";", "/",
          "//", "(", ")", ".", "&", ",", "!", "o.name", " | ", "#x#", "{o.name}",
          "{#x# | p(o:object)}", "[{o.name|q(o)}]", "\n\n", "-", "é"]


def test_symbols_parse_as_the_reference_parses_them() -> None:
    rng = random.Random(0)
    for _ in range(3000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 10)))
        assert _native_symbols(text) == _reference_symbols(text), repr(text)


def test_queries_parse_as_the_reference_parses_them() -> None:
    from textworld.logic import Rule

    rng = random.Random(1)
    blanks = ["", "", " ", "\t", "  ", "\n", " # note\n"]

    def query() -> str:
        preds = []
        for _ in range(rng.randint(1, 3)):
            params = [rng.choice(["x", "y'", "z:object", "x:object", "w : agent", "r:receptacle"])
                      for _ in range(rng.randint(0, 3))]
            sep = rng.choice(blanks) + "," + rng.choice(blanks)
            name = rng.choice(["p", "not_q", "!r", "holds", "atlocation"])
            preds.append(name + rng.choice(blanks) + "(" + sep.join(params) + ")")
        text = (rng.choice(blanks) + "&" + rng.choice(blanks)).join(preds) + rng.choice(blanks)
        for _ in range(rng.choice([0, 0, 1, 2])):  # a few random edits
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(["", "(", ")", ",", ":", "&", "!", " ", "#", "é"]) + \
                text[at + rng.randint(0, 1):]
        return text

    agree = 0
    for _ in range(3000):
        text = query()
        try:
            ref = [
                (p.name, [(ph.name, ph.type) for ph in p.parameters])
                for p in Rule.parse_conjunctive_query(text).preconditions
            ]
        except Exception:
            ref = None
        try:
            mine = [(p.name, [tuple(ph) for ph in p.params]) for p in csg.parse_query(text)]
        except csg.GrammarError:
            mine = None
        assert mine == ref, repr(text)
        agree += ref is not None
    assert agree > 100  # the sample holds many valid queries too


def test_names_are_alfworlds() -> None:
    from alfworld.agents.utils.misc import Demangler
    from textworld.generator.game import EntityInfo

    from gagpo.envs.alfworld.native.names import demangle

    rng = random.Random(2)
    classes = ["apple", "cabinet", "sink", "loc", "knife", "butterknife", "bathtub"]
    for _ in range(50):
        ids = {"agent1", "appletype", "sinkbasintype"}
        for _ in range(rng.randint(1, 30)):
            cls = rng.choice(classes)
            tail = "_bar_".join(f"_minus_0{rng.randint(0, 9)}_dot_{rng.randint(10, 99)}"
                                for _ in range(3))
            ids.add(f"{cls}_bar_{tail}" + ("_bar_sinkbasin" if cls == "sink" else ""))
        infos = {i: EntityInfo(i, "object") for i in ids}
        ref = Demangler(game_infos=infos)
        assert demangle(ids) == {i: ref.demangle_alfred_name(i) for i in ids}


# -- the env on the native engine ------------------------------------------------------------------


def test_env_native_equals_reference_under_the_expert(data_dir: Path) -> None:
    import gymnasium

    import gagpo.envs  # noqa: F401  (registers ALFWorld-v0)

    ref = gymnasium.make("ALFWorld-v0", data_dir=str(data_dir), split="train", engine="reference")
    nat = gymnasium.make("ALFWorld-v0", data_dir=str(data_dir), split="train", engine="native")
    keys = ("admissible_actions", "state_key", "won", "score", "action_valid", "instruction",
            "feedback", "task_id")
    for task in range(len(TASK_TYPES)):
        o1, i1 = ref.reset(options={"task": task})
        o2, i2 = nat.reset(options={"task": task})
        assert nat.unwrapped.engine_in_use == "native"
        assert o1 == o2 and {k: i1[k] for k in keys} == {k: i2[k] for k in keys}
        for command in ["look", "inventory", "jump", *[None] * 30]:
            if command is None:
                command = nat.unwrapped.expert_action()
            s1, s2 = ref.step(command), nat.step(command)
            assert s1[:4] == s2[:4], command
            assert {k: s1[4][k] for k in keys} == {k: s2[4][k] for k in keys}, command
            if s2[2]:
                break
        assert s2[4]["won"], f"the expert did not win task {task} on the native engine"


def test_env_default_engine_is_native(data_dir: Path) -> None:
    """The default became the native engine once the full differential run was clean."""
    from gagpo.envs.alfworld.env import AlfworldEnv

    env = AlfworldEnv(data_dir=str(data_dir))
    env.reset(options={"task": 0})
    assert env.engine == "native" and env.engine_in_use == "native"


def test_env_rejects_an_unknown_engine(data_dir: Path) -> None:
    from gagpo.envs.alfworld.env import AlfworldEnv

    with pytest.raises(ValueError, match="engine must be one of"):
        AlfworldEnv(data_dir=str(data_dir), engine="fast")


# -- unreadable game files -------------------------------------------------------------------------


def _broken(one_game: Path, tmp_path: Path, **changes: object) -> Path:
    data = json.loads(one_game.read_text())
    for key, edit in changes.items():
        data[key] = edit(data[key]) if callable(edit) else edit
    path = tmp_path / "game.tw-pddl"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("changes", "part", "detail"),
    [
        ({"pddl_domain": lambda t: t.rsplit(")", 1)[0]}, "pddl_domain", "missing ')'"),
        ({"pddl_domain": lambda t: t.replace("(holds ?a ?o)", "(grasps ?a ?o)", 1)},
         "pddl_domain action", "undeclared predicate 'grasps'"),
        ({"pddl_domain": lambda t: t.replace(":effect", ":effekt", 1)}, "pddl_domain action",
         "expected ':effect'"),
        ({"pddl_problem": lambda t: t.replace("(:init", "(:init (opened nothing_here)", 1)},
         "pddl_problem", "undeclared 'nothing_here'"),
        ({"pddl_problem": lambda t: t.replace("(:goal", "(:gaol", 1)}, "pddl_problem",
         "unknown problem section ':gaol'"),
        ({"grammar": lambda t: t.replace('"intro": [', '"intro": [[', 1)}, "grammar block",
         "not JSON"),
        ({"grammar": lambda t: t.replace('template :: "open {r}";', "", 1)}, "grammar",
         "action OpenObject has no template"),
        ({"grammar": lambda t: t.replace("{r.name}", "{__import__('os').name}", 1)},
         "grammar rule", "__import__"),
        ({"grammar": lambda t: t.replace("holdsany(a:agent)", "holdsany(a:robot)", 1)},
         "grammar rule 'inventory.feedback' production 0", "unknown type 'robot'"),
        ({"pddl_problem": None}, "pddl_problem", "missing or not text"),
    ],
)
def test_unreadable_game_names_file_and_part(
    one_game: Path, tmp_path: Path, changes: dict, part: str, detail: str
) -> None:
    path = _broken(one_game, tmp_path, **changes)
    with pytest.raises(GameFileError) as err:
        load_game(path)
    message = str(err.value)
    assert str(path) in message and part in message and detail in message, message
    assert err.value.path == str(path) and err.value.part.startswith(part.split(" ")[0])


def test_not_a_game_file(tmp_path: Path) -> None:
    path = tmp_path / "game.tw-pddl"
    path.write_text("{not json")
    with pytest.raises(GameFileError, match="cannot read file: not a JSON game file"):
        load_game(path)
    with pytest.raises(GameFileError, match="cannot read file"):
        load_game(tmp_path / "missing.tw-pddl")


def test_env_plays_an_unreadable_game_on_the_reference_with_a_warning(
    one_game: Path, tmp_path: Path
) -> None:
    """The fallback happens at reset, says which file and why, and the episode is the
    reference's from start to end."""
    import shutil

    from gagpo.envs.alfworld.env import AlfworldEnv

    root = tmp_path / "data" / "json_2.1.1" / "train"
    trial = root / one_game.parent.parent.name / one_game.parent.name
    shutil.copytree(one_game.parent, trial)
    game = trial / "game.tw-pddl"
    data = json.loads(game.read_text())
    data["grammar"] = data["grammar"].replace("{r.name}", "{r.name.zfill(3)}", 1)
    game.write_text(json.dumps(data))

    env = AlfworldEnv(data_dir=tmp_path / "data", engine="native")
    with pytest.warns(RuntimeWarning, match=r"cannot read this game .*game\.tw-pddl.*grammar"):
        obs, info = env.reset(options={"task": 0})
    assert env.engine_in_use == "reference"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning, no switch mid-episode
        for _ in range(3):
            env.step(info["admissible_actions"][0])
            assert env.engine_in_use == "reference"
        env.reset(options={"task": 0})
    assert env.engine_in_use == "reference"


def test_native_engine_leaves_state_alone_on_bad_commands(one_game: Path) -> None:
    env = NativeEnv()
    env.load(one_game)
    obs, infos = env.reset()
    before = (sorted(map(str, infos["facts"])), infos["admissible_commands"])
    for command in ["", " ", "x" * 10000, "\x00", "go to nowhere 9", "look\u3000x", "🙂"]:
        obs, score, done, infos = env.step(command)
        assert obs == "Nothing happens." and score == 0 and not done
        assert (sorted(map(str, infos["facts"])), infos["admissible_commands"]) == before


# -- what the native path needs ------------------------------------------------------------------

_BLOCKED_PLAY = r"""
import sys

BLOCKED = ("textworld", "tatsu", "fast_downward", "alfworld")


class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"blocked: {name}")
        return None


sys.meta_path.insert(0, Block())
import gymnasium
import gagpo.envs  # noqa: F401

env = gymnasium.make("ALFWorld-v0", data_dir=sys.argv[1], split="train",
                     request_infos=["expert_action"])
obs, info = env.reset(options={"task": 0})
assert "Your task is to:" in obs and info["admissible_actions"], obs
keys = {info["state_key"]}
for _ in range(50):
    obs, reward, terminated, truncated, info = env.step(info["expert_action"])
    keys.add(info["state_key"])
    if terminated or truncated:
        break
assert info["won"] and reward == 1.0, (obs, info)
env.step("take the moon from the sky")  # invalid: answered, not raised
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
assert not loaded, loaded
print("won in", len(keys) - 1, "steps")
"""


def test_native_play_imports_no_reference_package(data_dir: Path, tmp_path: Path) -> None:
    """A game plays to the win (expert, state keys, an invalid command) in a process where
    importing textworld, tatsu, fast_downward or alfworld fails."""
    import subprocess
    import sys

    script = tmp_path / "blocked.py"
    script.write_text(_BLOCKED_PLAY)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(script), str(data_dir)], capture_output=True,
                          text=True, cwd=root, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "won in" in done.stdout


def test_generator_checks_plans_on_the_native_engine(monkeypatch) -> None:
    """solve() starts the reference engine only to plan (on the task's part of the scene);
    the plan's replay in the full game runs on the native engine and wins there."""
    from gagpo.envs.alfworld import engine, generator

    started: list[str] = []
    real_start = engine.start

    def start(game, infos=None):
        started.append(game["pddl_problem"] if isinstance(game, dict) else str(game))
        return real_start(game, infos)

    monkeypatch.setattr(engine, "start", start)
    monkeypatch.setattr(generator, "_solver", generator._Solver())
    game = generator.sample_game("train", 3, 5, "pick_heat_then_place_in_recep")
    plan = generator.solve(game)
    assert len(started) == 1 and started[0] == generator.planning_problem(game)
    env = NativeEnv()
    env.load_data(game.game_json(), "generated")
    _, infos = env.reset()
    for command in plan:
        assert command in infos["admissible_commands"]
        _, _, _, infos = env.step(command)
    assert infos["won"]

"""The speed-ups leave the reference engine's output unchanged: transcripts of ALFWorld-v0 (patches
on, our wrapper) equal those of the stock engine (patches off, TextWorld's gym layer as ALFWorld's
AlfredTWEnv builds it) character for character, and the patches come off exactly."""

from __future__ import annotations

import random

import pytest

from gagpo.envs.alfworld import available

pytestmark = pytest.mark.skipif(
    not available(), reason="alfworld/textworld not installed (pip install 'gagpo[alfworld]')"
)


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    from gagpo.envs.alfworld.games import GameSource
    from gagpo.envs.alfworld.generator import generate_games

    root = tmp_path_factory.mktemp("alfworld_engine")
    # A kitchen task and a room with a lamp: openable receptacles, appliances, toggling.
    generate_games(root, "train", 1, seed=21, task_types=["pick_heat_then_place_in_recep"])
    generate_games(root, "train", 1, seed=21, start=1, task_types=["look_at_obj_in_light"])
    return root, GameSource(root).games("train")


def _stock_transcript(path, commands):
    from gagpo.envs.alfworld import engine, speedups

    with speedups.disabled():
        env = engine.start_stock(path)
        obs, infos = env.reset()
        out = [(obs[0], infos["admissible_commands"][0], infos["won"][0])]
        for c in commands:
            obs, scores, dones, infos = env.step([c])
            out.append((obs[0], infos["admissible_commands"][0], infos["won"][0]))
        env.close()
    return out


def test_transcripts_equal_the_stock_engine(games):
    from gagpo.envs.alfworld import speedups
    from gagpo.envs.alfworld.env import AlfworldEnv

    root, listed = games
    env = AlfworldEnv(data_dir=root, engine="reference")  # the speedups under test
    assert speedups.is_enabled()
    rng = random.Random(0)
    for i, game in enumerate(listed):
        obs, info = env.reset(options={"task": i})
        ours = [(obs, info["admissible_actions"], info["won"])]
        commands = []
        for t in range(12):
            if t % 5 == 4:
                command = rng.choice(["xyzzy", "help", "examine " + info["admissible_actions"][0]])
            else:
                command = rng.choice(info["admissible_actions"])
            commands.append(command)
            obs, _, _, _, info = env.step(command)
            ours.append((obs, info["admissible_actions"], info["won"]))
        # ... and the end of the walkthrough, so that the winning step is compared too.
        env.reset(options={"task": i})
        walk = env.walkthrough()
        for command in walk:
            obs, _, _, _, info = env.step(command)
            ours.append((obs, info["admissible_actions"], info["won"]))
        commands += walk
        # The reset before the walkthrough is the same text as the first one.
        stock = _stock_transcript(game.path, commands[:12]) + _stock_transcript(game.path, walk)[1:]
        assert ours[-1][2] is True
        assert len(stock) == len(ours)
        for (o1, a1, w1), (o2, a2, w2) in zip(ours, stock, strict=True):
            assert o1 == o2
            assert a1 == [c for c in a2 if c != "help"]
            assert w1 == w2
    assert speedups.is_enabled()
    env.close()


def test_patches_come_off_exactly():
    import fast_downward
    import textworld.envs.pddl.logic as pddl_logic
    import textworld.envs.pddl.textgen as textgen
    import textworld.logic as tw_logic

    from gagpo.envs.alfworld import speedups

    speedups.disable()
    before = (
        textgen._parse_and_convert,
        textgen.copy_context,
        tw_logic.Rule.__dict__["parse_conjunctive_query"],
        fast_downward.pddl2sas,
        pddl_logic._parse_and_convert,
    )
    with speedups.enabled():
        assert textgen.copy_context is not before[1]
        assert fast_downward.pddl2sas is not before[3]
    after = (
        textgen._parse_and_convert,
        textgen.copy_context,
        tw_logic.Rule.__dict__["parse_conjunctive_query"],
        fast_downward.pddl2sas,
        pddl_logic._parse_and_convert,
    )
    assert before == after

"""TRL: the environment classes GRPOTrainer's ``environment_factory`` takes (named tools, the
episode's score as reward), played by the expert over a served env; and the example's 2-step
run with the real GRPOTrainer on the tiny model against a real server."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("openenv", reason="needs the openenv extra: pip install 'gagpo[openenv]'")

import gagpo.envs  # noqa: E402, F401
from gagpo.integrations.openenv.server import running_server  # noqa: E402
from gagpo.integrations.trl import TOOLS, ALFWorldTools, WebShopTools  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXPERT = {"request_infos": ["expert_action"]}


def tool_names(cls) -> set[str]:
    """The tools TRL exposes: public functions of the class but reset and get_reward."""
    return {n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
            if not n.startswith("_") and n not in ("reset", "get_reward")}


def test_the_tools_are_named_and_documented_as_trl_renders_them():
    from transformers.utils import get_json_schema

    assert tool_names(WebShopTools) == {"search", "click"}
    assert tool_names(ALFWorldTools) == {"go_to", "take", "move", "open", "close", "heat",
                                         "cool", "clean", "use", "examine", "look", "inventory"}
    for cls in TOOLS.values():
        for name in tool_names(cls):
            schema = get_json_schema(getattr(cls, name))  # raises on a missing docstring/arg
            assert schema["function"]["name"] == name and schema["function"]["description"]


def call_for(tools, command: str) -> str:
    """The tool call that plays ``command`` (the inverse of the tools' own formats)."""
    if isinstance(tools, WebShopTools):
        verb, arg = command[:-1].split("[", 1)
        return getattr(tools, verb)(arg)
    words = command.split()
    if command.startswith("go to "):
        return tools.go_to(command[len("go to "):])
    for verb, sep in (("take", " from "), ("move", " to "), ("heat", " with "),
                      ("cool", " with "), ("clean", " with ")):
        if words[0] == verb:
            obj, place = command[len(verb) + 1:].split(sep)
            return getattr(tools, verb)(obj, place)
    if len(words) == 1:
        return getattr(tools, words[0])()
    return getattr(tools, words[0])(command[len(words[0]) + 1:])


@pytest.mark.parametrize("env_id", list(TOOLS))
def test_expert_episodes_through_the_tools_over_a_server_earn_the_in_process_score(env_id):
    with running_server(env_id, EXPERT, max_sessions=4, idle_timeout=60) as server:
        for task in (0, 1):
            env = gym.make(env_id, **EXPERT)
            _, info = env.reset(seed=0, options={"task": task})
            commands, done = [], False
            while not done:
                commands.append(info["expert_action"])
                _, _, term, trunc, info = env.step(commands[-1])
                done = term or trunc
            env.close()
            tools = TOOLS[env_id](url=server.url)
            first = tools.reset(task=task, seed=0, prompt=[{"role": "user", "content": "x"}])
            assert "Admissible actions:" in first and tools.get_reward() == 0.0
            for command in commands:
                text = call_for(tools, command)
            assert "score" in text
            assert tools.get_reward() == info["score"] and tools.won == info["won"]
            tools._shutdown()


def test_the_trl_example_trains_two_steps_with_grpotrainer_whose_tool_calls_reach_the_server(
        tmp_path):
    pytest.importorskip("trl", reason="needs the trl extra: pip install 'gagpo[trl]'")
    spec = importlib.util.spec_from_file_location("trl_grpo_webshop",
                                                  ROOT / "examples" / "trl_grpo_webshop.py")
    example = importlib.util.module_from_spec(spec)
    sys.modules["trl_grpo_webshop"] = example
    spec.loader.exec_module(example)
    generations = 2
    with running_server("WebShop-v0", max_sessions=8, idle_timeout=120) as server:
        # the warm start teaches the first move only (the search), to keep this fast
        result = example.train(2, "tiny", server.url, str(tmp_path), generations=generations,
                               warm_steps=60, tasks=2, warm_moves=1,
                               max_completion_length=1024)
        assert result["steps"] == 2
        # every rollout played a session of the server (2 steps x 2 generations at least)
        assert server.app.served.resets >= 4
        steps = server.app.served.steps
    logged = result["log"]
    assert len(logged) == 2
    for row in logged:  # the reward column is the env's own (get_reward: the episode's score)
        assert "rewards/WebShopTools/mean" in row and 0.0 <= row["reward"] <= 1.0
    # the model's tool calls, parsed by GRPOTrainer out of its completions, were played on
    # the server: each call that did not fail is one env step there
    calls = sum(row["tools/call_frequency"] * generations for row in logged)
    failed = sum(row["tools/call_frequency"] * row["tools/failure_frequency"] * generations
                 for row in logged)
    assert calls > 0, "GRPOTrainer parsed no tool call out of the model's completions"
    assert steps >= 1 and steps == round(calls - failed)


def _episodes_with_partial_scores() -> list[tuple[int, list[str]]]:
    """(task, commands) of WebShop episodes that end in every way a reward must tell apart: a
    wrong product bought (a score strictly between 0 and 1, not won), the right one (1, won),
    and one still going (0 so far)."""
    env = gym.make("WebShop-v0", **EXPERT)
    out = []
    for task in (1, 3):
        _, info = env.reset(seed=0, options={"task": task})
        search = info["expert_action"]
        _, _, _, _, info = env.step(search)
        wrong = next(a for a in info["admissible_actions"]
                     if a.startswith("click[b0") and a != info["expert_action"])  # a product
        out.append((task, [search, wrong, "click[Buy Now]"]))
    _, info = env.reset(seed=0, options={"task": 2})
    commands, done = [], False
    while not done:
        commands.append(info["expert_action"])
        _, _, term, trunc, info = env.step(commands[-1])
        done = term or trunc
    out.append((2, commands))
    _, info = env.reset(seed=0, options={"task": 4})
    out.append((4, [info["expert_action"]]))
    env.close()
    return out


def test_grpotrainer_rewards_each_rollout_with_its_episodes_score_not_its_success(tmp_path):
    """TRL's own reward path: GRPOTrainer made with ``environment_factory=WebShopTools`` turns
    ``get_reward`` into a reward column and scores each rollout's environment with it
    (``_calculate_rewards``). Each rollout's reward is the score a fresh in-process env gives
    the same commands: 0 < score < 1 for a wrong product bought, 1 for the right one, 0 for an
    episode not finished."""
    pytest.importorskip("trl", reason="needs the trl extra: pip install 'gagpo[trl]'")
    import os
    from functools import partial

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_chat_template

    from gagpo.agents.models import load_model

    model, tokenizer = load_model("tiny", device="cpu")
    tokenizer.chat_template = qwen3_chat_template  # one that renders tools, as TRL needs
    episodes = _episodes_with_partial_scores()
    n = len(episodes)
    config = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=n,
                        num_generations=n, max_completion_length=16, report_to="none",
                        use_cpu=True, bf16=False, save_strategy="no", dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config,
                          train_dataset=Dataset.from_list(
                              [{"prompt": [{"role": "user", "content": "buy it"}], "task": 1,
                                "seed": 0}]),
                          environment_factory=partial(WebShopTools))
    column = trainer.reward_func_names.index("WebShopTools")
    # The rollouts: each a tools instance that played its episode through the tools.
    rollouts, want = [], []
    for task, commands in episodes:
        tools = WebShopTools()
        tools.reset(task=task, seed=0)
        for command in commands:
            call_for(tools, command)
        rollouts.append(tools)
        replay = gym.make("WebShop-v0")
        _, info = replay.reset(seed=0, options={"task": task})
        for command in commands:
            _, _, _, _, info = replay.step(command)
        want.append((info["score"], info["won"]))
        replay.close()
    scores = [s for s, _ in want]
    assert any(0.0 < s < 1.0 for s in scores) and 1.0 in scores and scores[-1] == 0.0
    trainer.environments = rollouts
    prompt = [{"role": "user", "content": "buy it"}]
    inputs = [{"prompt": prompt, "task": task, "seed": 0} for task, _ in episodes]
    completions = [[{"role": "assistant", "content": ""}] for _ in episodes]
    rewards = trainer._calculate_rewards(inputs, [prompt] * n, completions, [[0]] * n)
    assert rewards[:, column].tolist() == pytest.approx(scores)
    for tools in rollouts:
        tools._shutdown()


def _render(obs: str, info: dict) -> str:
    """What the model reads after a step that did not end the episode (the tools' format)."""
    actions = info["admissible_actions"]
    shown = ", ".join(actions[:50]) + (f" (and {len(actions) - 50} more)"
                                       if len(actions) > 50 else "")
    return f"{obs}\n\nAdmissible actions: {shown}"


@pytest.mark.parametrize("env_id", list(TOOLS))
def test_each_tool_plays_its_command_and_says_what_the_env_said(env_id):
    """In this process: each tool call is its env command (every ALFWorld tool, once, whether
    the engine takes it or not), and the text the model reads is the env's observation with
    the admissible actions (more than 50 summarised), then, at the end, the outcome; replayed
    on a fresh env. The reward is the score so far (0 before any step and before a reset)."""
    tools = TOOLS[env_id]()
    assert tools.get_reward() == 0.0
    with pytest.raises(RuntimeError, match="the episode has not started: reset\\(\\) first"):
        call_for(tools, "look" if env_id == "ALFWorld-v0" else "search[x]")
    env = gym.make(env_id, **EXPERT)
    split = env.unwrapped.splits[-1]
    obs, info = env.reset(seed=1, options={"task": 2, "split": split})
    first = tools.reset(task=2, split=split, seed=1, prompt="ignored")
    assert first == f"\n\n{tools.guide}\n\n{_render(obs, info)}"
    assert tools.get_reward() == 0.0
    if env_id == "ALFWorld-v0":
        place = info["admissible_actions"][0].removeprefix("go to ")
        commands = [f"open {place}", f"close {place}", f"examine {place}", "look",
                    "inventory", f"use {place}", f"move apple 1 to {place}",
                    f"heat apple 1 with {place}", f"cool apple 1 with {place}",
                    f"clean apple 1 with {place}", f"take apple 1 from {place}",
                    f"go to {place}"]
    else:
        commands = []
    while True:  # the commands above, then the expert's to the end
        command = commands.pop(0) if commands else info["expert_action"]
        obs, _, term, trunc, info = env.step(command)
        text = call_for(tools, command)
        if term or trunc:
            end = "won" if info["won"] else "ended"
            assert text == f"{obs}\n\nThe episode {end} with score {info['score']:.2f}."
            assert tools.get_reward() == info["score"] and tools.won == info["won"]
            break
        assert text == _render(obs, info), command
    assert info["won"]  # the expert finished it
    env.close()
    tools._shutdown()
    with pytest.raises(ValueError, match="env_kwargs are the server's business when url is "
                                         "given"):
        TOOLS[env_id](url="http://127.0.0.1:1", max_steps=3)


def test_an_episode_cut_by_the_step_limit_ends_unwon_and_random_tasks_follow_the_seed():
    """In this process the env's keyword arguments reach it (a step limit of 2 here): the
    episode ends, not won, with its score, and a later call gets the env's own answer rather
    than an error. Without a task, the seed picks it, as it does for the env."""
    tools = WebShopTools(max_steps=2)
    env = gym.make("WebShop-v0", max_steps=2)
    _, want = env.reset(seed=5)
    tools.reset(seed=5)
    assert tools._info["task_id"] == want["task_id"]
    env.step("search[shoes]")
    call_for(tools, "search[shoes]")
    obs, _, _, trunc, info = env.step("click[no such button]")
    assert trunc and not info["won"]
    assert call_for(tools, "click[no such button]") == (
        f"{obs}\n\nThe episode ended with score {info['score']:.2f}.")
    after = env.step("click[no such button]")[0]
    assert "reset()" in after and call_for(tools, "click[no such button]") == (
        f"{after}\n\nThe episode ended with score {info['score']:.2f}.")
    env.close()
    tools._shutdown()
    with pytest.raises(RuntimeError, match=r"^the episode has not started: reset\(\) first$"):
        WebShopTools().search("x")
    with pytest.raises(ValueError, match="^env_kwargs are the server's business when url is "
                                         "given$"):
        WebShopTools(url="http://127.0.0.1:1", max_steps=3)


def test_every_alfworld_tool_plays_a_command_the_engine_takes():
    """Each ALFWorld tool, called where its command is admissible, changes the game as that
    command does on a fresh env: the expert's plans through the tools (heat, cool, clean and
    use among them, from games of each task type), with the admissible examine, close, look
    and inventory of the way played first. A tool that sent another command (or none) would
    be rejected by the engine, and read "Nothing happens." where the env moved on."""
    taken: set[str] = set()
    # ALFWorld's twelve commands, one tool each (the tools' names are checked against the
    # class in test_the_tools_are_named_and_documented_as_trl_renders_them).
    verbs = {"go_to", "open", "close", "take", "move", "heat", "cool", "clean", "use",
             "examine", "look", "inventory"}
    env, tools = gym.make("ALFWorld-v0", **EXPERT), ALFWorldTools()
    for task in range(40):
        if taken == verbs:
            break
        obs, info = env.reset(seed=0, options={"task": task})
        tools.reset(task=task, seed=0)
        done = False
        while not done:
            extra = [a for a in info["admissible_actions"]
                     if a.split()[0] in {"examine", "close", "look", "inventory"}
                     and a.split()[0] not in taken]
            command = extra[0] if extra else info["expert_action"]
            obs, _, term, trunc, info = env.step(command)
            text = call_for(tools, command)
            done = term or trunc
            assert info["action_valid"], command  # admissible, so taken
            verb = "go_to" if command.startswith("go to ") else command.split()[0]
            taken.add(verb)
            if not done:
                assert text == _render(obs, info), command
        assert info["won"] and tools.won
    tools._shutdown()
    env.close()
    assert taken == verbs, verbs - taken


@pytest.mark.parametrize("split, task, commands, count, more", [
    ("train", 30, [None], 60, " (and 10 more)"),
    ("valid_seen", 9, [None], 50, ""),
    ("valid_seen", 9, ["go to stoveburner 3", "take pot 1 from stoveburner 4"], 51,
     " (and 1 more)"),
])
def test_up_to_fifty_admissible_actions_are_listed_and_the_rest_counted(
        split, task, commands, count, more):
    """Crowded ALFWorld rooms of the default games (``None``: the expert's command): the model
    reads the env's first 50 admissible commands, in the env's order, and how many more
    there are; 50 exactly are all listed, with no count; not the whole list nor a silent
    cut."""
    env, tools = gym.make("ALFWorld-v0", **EXPERT), ALFWorldTools()
    _, info = env.reset(seed=0, options={"task": task, "split": split})
    tools.reset(task=task, split=split, seed=0)
    for command in commands:
        command = command or info["expert_action"]
        obs, _, _, _, info = env.step(command)
        text = call_for(tools, command)
    actions = info["admissible_actions"]
    assert len(actions) == count
    assert text == f"{obs}\n\nAdmissible actions: {', '.join(actions[:50])}{more}"
    tools._shutdown()
    env.close()

"""Prompts carry the task, the step count, the last k pairs, the current observation and the
admissible actions; the length cap drops history, never the current observation; the agent
and the scripted policies play WebShop-v0 through the parser."""

import gymnasium as gym
import numpy as np
import pytest

import gagpo.envs  # noqa: F401  (registers the environments)
from gagpo.agents.memory import EpisodeMemory
from gagpo.agents.parser import parse_reply
from gagpo.agents.policies import ExpertPolicy, Policy, RandomPolicy
from gagpo.agents.policies.base import Request
from gagpo.agents.policies.scripted import explain
from gagpo.agents.prompts import build_messages, build_prompt, resolve_env_name
from gagpo.agents.react import ReActAgent

SHOP_ACTIONS = ["click[back to search]", "click[next >]", "click[b0abc12345]"]
HOUSE_ACTIONS = ["go to countertop 1", "open fridge 1", "inventory", "look"]


def info(instruction="find red shoes", actions=SHOP_ACTIONS, **extra):
    return {"instruction": instruction, "admissible_actions": list(actions), **extra}


# --- prompts --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "name, env", [("webshop", "webshop"), ("WebShop-v0", "webshop"), ("ALFWorld-v0", "alfworld"),
                  (" alfworld ", "alfworld")],
)
def test_env_names(name, env):
    assert resolve_env_name(name) == env


def test_other_envs_get_the_generic_template():
    """A user's own text env (any id, or "module:Id") is prompted with the generic template,
    which still holds the task, the observation and the actions."""
    assert resolve_env_name("CartPole-v1") == resolve_env_name("mine:Corridor-v0") == "text"
    text = build_prompt("Corridor-v0", "THE-TASK", 0, [], "OBS-NOW", ["go on", "go back"])
    assert "THE-TASK" in text and "OBS-NOW" in text and "- go on\n- go back" in text
    assert "<action>" in text and "shopping" not in text and "household" not in text


@pytest.mark.parametrize("env, actions", [("webshop", SHOP_ACTIONS), ("alfworld", HOUSE_ACTIONS)])
def test_prompt_holds_everything(env, actions):
    history = [("OBS-FOUR", "ACT-FOUR"), ("OBS-FIVE", "ACT-FIVE")]
    text = build_prompt(env, "THE-TASK", 5, history, "OBS-NOW", actions, max_steps=15)
    assert "THE-TASK" in text
    assert "5 steps" in text and "at most 15" in text
    assert "[step 4] observation: OBS-FOUR" in text and "[step 4] action: ACT-FOUR" in text
    assert "[step 5] observation: OBS-FIVE" in text and "[step 5] action: ACT-FIVE" in text
    assert "(step 6):\nOBS-NOW" in text
    for a in actions:
        assert f"- {a}\n" in text + "\n"
    assert "<think>" in text and "<action>" in text
    # Order: task, progress, history, current observation, actions, format.
    positions = [text.index(s) for s in ("THE-TASK", "5 steps", "OBS-FOUR", "OBS-NOW", actions[0])]
    assert positions == sorted(positions)
    messages = build_messages(env, "THE-TASK", 5, history, "OBS-NOW", actions, max_steps=15)
    assert messages == [{"role": "user", "content": text}]


def test_first_step_and_hidden_history():
    first = build_prompt("webshop", "task", 0, [], "start page", ["search[<query>]"])
    assert "first step" in first and "not shown" not in first and "[step" not in first
    later = build_prompt("webshop", "task", 3, [], "page", ["search[<query>]"])
    assert "3 steps" in later and "not shown" in later
    with pytest.raises(ValueError):
        build_prompt("webshop", "task", 1, [("a", "b"), ("c", "d")], "page", [])


def test_templates_differ_by_env_and_keep_braces():
    shop = build_prompt("webshop", "{instruction} {x}", 0, [], "{obs}", [])
    house = build_prompt("alfworld", "{instruction} {x}", 0, [], "{obs}", [])
    assert shop != house
    assert "{instruction} {x}" in shop and "{obs}" in shop  # user text is never formatted
    assert "search[your keywords]" in shop and "household" in house


# --- memory and the agent -------------------------------------------------------------------

def test_memory_window():
    mem = EpisodeMemory(2)
    for i in range(5):
        mem.add(f"o{i}", f"a{i}")
    assert mem.recent() == [("o3", "a3"), ("o4", "a4")] and mem.steps == 5 and len(mem) == 2
    mem.clear()
    assert mem.recent() == [] and mem.steps == 0
    zero = EpisodeMemory(0)
    zero.add("o", "a")
    assert zero.recent() == [] and zero.steps == 1


def test_agent_tracks_each_env():
    agent = ReActAgent("WebShop-v0", history_length=2)
    for i in range(4):
        agent.observe(0, f"env0-obs{i}", f"env0-act{i}")
    agent.observe(1, "env1-obs0", "env1-act0")
    reqs = agent.requests(["env0-now", "env1-now"], [info(), info(instruction="other")])
    p0, p1 = (r.messages[0]["content"] for r in reqs)
    assert "4 steps" in p0 and "env0-obs3" in p0 and "env0-obs2" in p0 and "env0-obs1" not in p0
    assert "1 step so far" in p1 and "env1-obs0" in p1 and "env0" not in p1 and "other" in p1
    assert reqs[0].admissible_actions == SHOP_ACTIONS and reqs[0].info["instruction"]
    # env_indices name the environments of a subset.
    (only,) = agent.requests(["env1-again"], [info()], env_indices=np.array([1]))
    assert "env1-obs0" in only.messages[0]["content"]
    agent.reset(0)
    assert "first step" in agent.requests(["x"], [info()])[0].messages[0]["content"]
    agent.reset()
    assert agent.memory(1).steps == 0
    with pytest.raises(ValueError):
        agent.requests(["a", "b"], [info()])


def test_a_prompt_read_late_shows_the_step_it_was_asked_for():
    """Prompts are rendered when first read; what they show is the memory at request time,
    whatever the agent observed or forgot since."""
    agent = ReActAgent("WebShop-v0", history_length=2)
    agent.observe(0, "obs0", "act0")
    eager = agent.messages(0, "now", info())
    (late,) = agent.requests(["now"], [info()])
    agent.observe(0, "obs1", "act1")
    agent.reset()
    assert late.messages == eager
    assert late.messages is late.messages  # rendered once


def test_char_cap_drops_oldest_history_first():
    agent = ReActAgent("webshop", history_length=3)
    for i in range(3):
        agent.observe(0, f"OLD{i}" + "x" * 1000, f"act{i}")
    full = agent.messages(0, "NOW", info())[0]["content"]
    assert all(f"OLD{i}" in full for i in range(3))
    agent.max_prompt_chars = len(full) - 10  # one pair must go: the oldest
    capped = agent.messages(0, "NOW", info())[0]["content"]
    assert len(capped) <= agent.max_prompt_chars
    assert "OLD0" not in capped and "OLD1" in capped and "OLD2" in capped
    assert "3 steps" in capped and "[step 2]" in capped and "[step 3]" in capped


def test_cap_never_drops_the_current_observation():
    agent = ReActAgent("alfworld", history_length=2, max_prompt_chars=500)
    agent.observe(0, "earlier", "look")
    huge = "You see " + "a mug, " * 2000 + "THE-END"
    text = agent.messages(0, huge, info("put a mug in the sink", HOUSE_ACTIONS))[0]["content"]
    assert huge in text  # whole, though alone it exceeds the cap
    assert "earlier" not in text and "put a mug in the sink" in text
    assert all(a in text for a in HOUSE_ACTIONS)


def test_token_cap_counts_chat_tokens():
    class WordTokenizer:  # one token per whitespace-separated word
        chat_template = None

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": text.split()}

    agent = ReActAgent("webshop", history_length=2, max_prompt_tokens=10**6,
                       tokenizer=WordTokenizer())
    agent.observe(0, "o1 " * 50, "a1")
    agent.observe(0, "o2 " * 50, "a2")
    n = agent.prompt_length(agent.messages(0, "now", info()))
    agent.max_prompt_tokens = n - 1
    text = agent.messages(0, "now", info())[0]["content"]
    assert "o1" not in text and "o2" in text
    with pytest.raises(ValueError):
        ReActAgent("webshop", max_prompt_tokens=10)


def test_agent_parses_with_its_settings():
    strict = ReActAgent("webshop")
    lenient = ReActAgent("webshop", map_near_miss=True)
    reply = "<think>t</think><action>click[b0abc1234]</action>"
    assert not strict.parse(reply, SHOP_ACTIONS).admissible
    assert lenient.parse(reply, SHOP_ACTIONS).action == "click[b0abc12345]"


# --- scripted policies on WebShop-v0 -------------------------------------------------------

def test_scripted_policies_keep_the_interface():
    assert isinstance(ExpertPolicy(), Policy) and isinstance(RandomPolicy(0), Policy)
    # One reply per request, in order; a scripted reply knows no tokens.
    expert = ExpertPolicy()
    assert expert.act([]) == [] and RandomPolicy(0).act([]) == []
    reqs = [Request([], SHOP_ACTIONS, {"expert_action": "click[next >]"}),
            Request([], SHOP_ACTIONS, {"expert_action": ["search[red shoes]", "click[x]"]}),
            Request([], [], {"expert_action": None})]
    replies = expert.act(reqs)
    assert [parse_reply(r.text, SHOP_ACTIONS + ["search[<query>]"]).action for r in replies] == [
        "click[next >]", "search[red shoes]", None]
    assert all(r.token_ids == [] and r.logprobs == [] for r in replies)
    with pytest.raises(KeyError, match="request_infos"):
        expert.act([Request([], SHOP_ACTIONS, {})])
    # The random policy answers each request from its own admissible actions.
    many = [Request([], [a]) for a in SHOP_ACTIONS] * 3
    picked = [parse_reply(r.text, SHOP_ACTIONS).action for r in RandomPolicy(1).act(many)]
    assert picked == [r.admissible_actions[0] for r in many]


def test_random_policy_is_seeded_and_fills_the_query():
    reqs = [Request([], ["search[<query>]"], {"instruction": "red shoes"}),
            Request([], SHOP_ACTIONS, {}), Request([], [], {})]
    a = RandomPolicy(3).act(reqs * 5)
    assert [r.text for r in a] == [r.text for r in RandomPolicy(3).act(reqs * 5)]
    assert a[0].text == "<think>random</think><action>search[red shoes]</action>"
    assert parse_reply(a[1].text, SHOP_ACTIONS).admissible
    assert parse_reply(a[2].text, []).action is None
    assert a[0].token_ids == [] and a[0].logprobs == []


@pytest.mark.parametrize("action, thought", [
    ("search[red shoes]", "I search for the product the request describes: red shoes."),
    ("click[b0c8jp98ut]", "This result fits the request best; I open it to check its details."),
    ("click[size 9]", "The request asks for size 9, so I choose that option."),
    ("click[back to search]", "This product is not the one asked for; I go back and search "
                              "again."),
    ("take pen 1 from desk 1", "I take the pen 1: the task needs it."),
    ("put pen 1 in/on drawer 2", "I put the pen 1 where the task wants it."),
    ("heat apple 1 with microwave 1", "The task wants the apple 1 hot, so I heat it."),
    ("", ""),
])
def test_the_experts_thought_says_why_it_acts(action, thought):
    """Demonstrations teach a thought worth having: what the action is for."""
    assert explain(action) == thought


def test_expert_policy_reads_the_info():
    reqs = [Request([], [], {"expert_action": "click[buy now]"}),
            Request([], [], {"expert_action": ["go to desk 1", "take pen 1 from desk 1"]}),
            Request([], [], {"expert_action": None})]
    texts = [r.text for r in ExpertPolicy().act(reqs)]
    assert texts[0] == ("<think>The product and the options I chose match the request, so I "
                        "buy it.</think><action>click[buy now]</action>")
    assert "<action>go to desk 1</action>" in texts[1]
    assert parse_reply(texts[2]).action is None
    with pytest.raises(KeyError, match="request_infos"):
        ExpertPolicy().act([Request([], [], {})])


def play(env, agent, policy, task, max_steps=15):
    """One episode through prompts, policy, parser and env; returns (info, parsed actions)."""
    obs, inf = env.reset(options={"task": task})
    agent.reset(0)
    parsed_all = []
    for _ in range(max_steps):
        requests = agent.requests([obs], [inf])
        assert obs in requests[0].messages[0]["content"]
        (reply,) = policy.act(requests)
        (parsed,) = agent.parse_replies([reply], requests)
        parsed_all.append(parsed)
        action = parsed.action or reply.text
        agent.observe(0, obs, action)
        obs, _, terminated, truncated, inf = env.step(action)
        if terminated or truncated:
            break
    return inf, parsed_all


@pytest.fixture(scope="module")
def shop_env():
    env = gym.make("WebShop-v0", request_infos=["expert_action"])
    yield env
    env.close()


def test_expert_solves_webshop_through_the_agent(shop_env):
    agent = ReActAgent("WebShop-v0")
    for task in (0, 1, 2):
        inf, parsed = play(shop_env, agent, ExpertPolicy(), task)
        assert inf["score"] > 0.5
        assert all(p.well_formed and p.admissible for p in parsed)


def test_random_policy_plays_webshop_with_admissible_actions(shop_env):
    agent = ReActAgent("WebShop-v0")
    inf, parsed = play(shop_env, agent, RandomPolicy(0), 3)
    assert parsed and all(p.well_formed and p.admissible for p in parsed)
    assert inf["action_valid"]

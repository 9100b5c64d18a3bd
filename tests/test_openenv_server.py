"""``gagpo serve env``: both environments over OpenEnv's WebSocket protocol, played with
OpenEnv's own clients, give the transcripts the in-process envs give (expert episodes with
invalid actions, and steps after the end); copies of one task share state keys over the wire;
the task API lists the env's splits and tasks. A real server on 127.0.0.1, real sockets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("openenv", reason="needs the openenv extra: pip install 'gagpo[openenv]'")

from test_openenv_limits import eventually

import gagpo.envs  # noqa: E402, F401  (registers the environments)
from gagpo.envs.base import INFO_KEYS  # noqa: E402
from gagpo.integrations.openenv.client import GagpoEnvClient  # noqa: E402
from gagpo.integrations.openenv.environment import GagpoEnvironment, ServedEnv  # noqa: E402
from gagpo.integrations.openenv.models import TextAction, TextObservation  # noqa: E402
from gagpo.integrations.openenv.server import running_server  # noqa: E402

EXPERT = {"request_infos": ["expert_action"]}
ENVS = {"WebShop-v0": ("click[no such button]", [0, 7]),   # bad action, tasks
        "ALFWorld-v0": ("fly to the moon", [0, 5])}


@pytest.fixture(scope="module", params=list(ENVS))
def served(request):
    with running_server(request.param, EXPERT, max_sessions=8, idle_timeout=60) as server:
        yield request.param, server


def as_json(info: dict) -> dict:
    return json.loads(json.dumps(info, default=lambda v: v.tolist() if hasattr(v, "tolist")
                                 else str(v)))


def play(reset, step, bad: str, n_bad: int, after_end: int = 2) -> list[tuple]:
    """An episode: ``n_bad`` invalid actions, then the expert's, then ``after_end`` more steps
    after the end. ``reset()`` -> (obs, info); ``step(a)`` -> gymnasium's 5-tuple. Infos as a
    client sees them: without the server's file paths (``gamefile``), which must not travel."""
    def plain(info: dict) -> dict:
        return {k: v for k, v in as_json(info).items() if k != "gamefile"}

    obs, info = reset()
    rows = [(obs, None, False, False, plain(info))]
    t, done, extra = 0, False, 0
    while extra < after_end:
        action = bad if t < n_bad else (info["expert_action"] or bad)
        obs, reward, terminated, truncated, info = step(action)
        rows.append((obs, reward, terminated, truncated, plain(info)))
        t += 1
        if done:
            extra += 1
        done = done or terminated or truncated
    return rows


def wire_step(client):
    def step(action):
        r = client.step(TextAction(command=action))
        o = r.observation
        assert o.reward == r.reward and o.done == r.done  # the observation carries them too
        info = {**{k: getattr(o, k) for k in INFO_KEYS}, **o.info}
        return o.text, r.reward, o.terminated, o.truncated, info
    return step


def wire_reset(client, **kwargs):
    def reset():
        o = client.reset(**kwargs).observation
        return o.text, {**{k: getattr(o, k) for k in INFO_KEYS}, **o.info}
    return reset


@pytest.mark.parametrize("n_bad", [0, 2])
def test_transcripts_over_the_wire_equal_the_in_process_ones(served, n_bad):
    env_id, server = served
    bad, tasks = ENVS[env_id]
    for task in tasks:
        env = gym.make(env_id, **EXPERT)
        want = play(lambda e=env, t=task: e.reset(seed=3, options={"task": t}), env.step, bad,
                    n_bad)
        env.close()
        with GagpoEnvClient(base_url=server.url).sync() as client:
            got = play(wire_reset(client, task=task, seed=3), wire_step(client), bad, n_bad)
        assert len(got) == len(want) > 3
        for t, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g == w, f"{env_id} task {task}, step {t}"
        assert any(not row[4]["action_valid"] for row in got[1:])  # invalid actions included
        assert got[-1][4]["admissible_actions"] == []  # a step after the end changes nothing


def test_openenvs_generic_client_works_unchanged(served):
    from openenv.core.generic_client import GenericEnvClient

    env_id, server = served
    env = gym.make(env_id, **EXPERT)
    obs, info = env.reset(seed=0, options={"task": 1})
    with GenericEnvClient(base_url=server.url).sync() as client:
        result = client.reset(task=1, seed=0)
        assert result.observation["text"] == obs
        # A reset starts an episode: nothing is over yet.
        assert not (result.done or result.observation["terminated"]
                    or result.observation["truncated"]), result
        # ALFWorld's path of the game file stays on the server: the task id names the game.
        assert ("gamefile" in info) == (env_id == "ALFWorld-v0")
        assert "gamefile" not in result.observation["info"]
        for key in INFO_KEYS:
            assert result.observation[key] == info[key], key
        action = info["expert_action"]
        obs, reward, terminated, truncated, info = env.step(action)
        result = client.step({"command": action})
        assert (result.observation["text"], result.reward, result.done) == (
            obs, reward, terminated or truncated)
        assert result.observation["state_key"] == info["state_key"]
        state = client.state()
        assert state["env_id"] == env_id and state["step_count"] == 1
        assert state["max_steps"] == env.unwrapped.max_steps
        if not result.done:  # the count goes on
            client.step({"command": "look"})
            assert client.state()["step_count"] == 2
    env.close()


def test_copies_of_one_task_share_state_keys_over_the_wire(served):
    env_id, server = served
    bad, _ = ENVS[env_id]
    clients = [GagpoEnvClient(base_url=server.url).sync() for _ in range(3)]
    try:
        first = [c.reset(task=2, seed=11).observation for c in clients]
        assert len({o.state_key for o in first}) == 1 and len({o.text for o in first}) == 1
        action = first[0].info["expert_action"]
        # copies 0 and 1 take the expert's action, copy 2 an invalid one: same state as before
        obs = [c.step(a).observation for c, a in zip(clients, [action, action, bad],
                                                      strict=True)]
        assert obs[0].state_key == obs[1].state_key != first[0].state_key
        assert obs[2].state_key == first[0].state_key and not obs[2].action_valid
    finally:
        for c in clients:
            c.close()
    assert eventually(lambda: server.active_sessions() == 0)


def test_the_task_api_lists_the_envs_splits_and_tasks(served):
    env_id, server = served
    env = gym.make(env_id, **EXPERT)
    splits = json.load(urllib.request.urlopen(f"{server.url}/{env_id}/splits"))
    assert [s["name"] for s in splits] == list(env.unwrapped.splits)
    for split in env.unwrapped.splits:
        tasks = list(env.unwrapped.split_tasks(split))
        assert _post(server, f"/{env_id}/num_tasks", {"split": split}) == {"num_tasks": len(tasks)}
        one = _post(server, f"/{env_id}/task", {"split": split, "index": len(tasks) - 1})
        assert one["task"]["task"] == tasks[-1]
    split = env.unwrapped.splits[-1]
    _, info = env.reset(seed=0, options={"task": env.unwrapped.split_tasks(split)[4],
                                         "split": split})
    with GagpoEnvClient(base_url=server.url).sync() as client:
        assert client.reset(split=split, index=4, seed=0).observation.task_id == info["task_id"]
    env.close()
    with pytest.raises(urllib.error.HTTPError) as e:
        _post(server, f"/{env_id}/num_tasks", {"split": "no-such-split"})
    assert e.value.code == 400 and "no-such-split" in e.value.read().decode()


def test_the_task_api_lists_ranges_and_refuses_indices_outside_a_split(served):
    """``/tasks`` lists every task of a split in order, each with its split and index;
    ``/task_range`` slices as Python does; ``/task`` refuses an index outside the split
    (negative ones included: they must not wrap to the end) with OpenEnv's 400."""
    env_id, server = served
    env = gym.make(env_id)
    split = env.unwrapped.splits[-1]
    tasks = list(env.unwrapped.split_tasks(split))
    env.close()
    want = [{"split": split, "index": i, "task": t} for i, t in enumerate(tasks)]
    assert _post(server, f"/{env_id}/tasks", {"split": split})["tasks"] == want
    for index in (0, 2, len(tasks) - 1):
        assert _post(server, f"/{env_id}/task", {"split": split, "index": index})["task"] == (
            want[index])
    for start, stop in [(1, 4), (None, 3), (len(tasks) - 2, None), (None, None), (-3, -1),
                        (None, 0)]:
        got = _post(server, f"/{env_id}/task_range", {"split": split, "start": start,
                                                        "stop": stop})["tasks"]
        assert got == want[start:stop], (start, stop)
    for index in (len(tasks), -1):
        with pytest.raises(urllib.error.HTTPError) as e:
            _post(server, f"/{env_id}/task", {"split": split, "index": index})
        assert e.value.code == 400 and "index" in e.value.read().decode().lower()
    # OpenEnv answers every IndexError alike; a Python caller of the environment learns which
    # index was out of range, the last one included (a bound of < n, not <= n).
    environment = GagpoEnvironment(ServedEnv(env_id))
    for index in (len(tasks), -1):
        with pytest.raises(IndexError) as e:
            environment.get_task(split, index)
        assert e.value.args == (index,)


def test_a_reset_by_index_or_task_says_where_the_session_is(served):
    """The session's state after a reset names the split, the task and the episode the
    client gave, with the step count back at 0; ``index`` counts in the split asked for,
    ``task`` takes the env's own index; giving both, a non-integer index, or a seed that is
    not an integer >= 0 is refused, and the session goes on."""
    env_id, server = served
    env = gym.make(env_id)
    split = env.unwrapped.splits[-1]
    tasks = env.unwrapped.split_tasks(split)
    _, info = env.reset(seed=0, options={"task": tasks[3], "split": split})
    _, first_info = env.reset(seed=0, options={"task": tasks[0], "split": split})
    env.close()
    with GagpoEnvClient(base_url=server.url).sync() as client:
        first = client.state()
        assert (first.env_id, first.split, first.step_count) == (env_id, env.unwrapped.split, 0)
        assert first.max_action_chars == env.unwrapped.action_space.max_length
        assert first.report_label == env.unwrapped.report_label
        client.reset(task=0, seed=0)
        client.step("look")
        obs = client.reset(split=split, index=3, seed=0, episode_id="ep-7").observation
        assert obs.task_id == info["task_id"] and obs.text
        state = client.state()
        assert (state.split, state.task_id, state.episode_id, state.step_count) == (
            split, info["task_id"], "ep-7", 0)
        for bad, match in [(dict(task=0, index=0), r"\bgive task or index, not both\b"),
                           (dict(index=True), "integer"), (dict(index="3"), "integer"),
                           (dict(task=0, seed=-1), "seed"), (dict(task=0, seed=True), "seed"),
                           (dict(split=split, index=len(tasks)),
                            rf"index {len(tasks)} is out of range 0\.\.{len(tasks) - 1} "),
                           (dict(split=split, index=-1), "out of range")]:
            with pytest.raises(Exception, match=match):
                client.reset(**bad)
        assert client.state().task_id == info["task_id"]  # the refused resets changed nothing
        assert client.step("look").observation.text
        assert client.reset(split=split, index=0).observation.task_id == first_info["task_id"]


def test_bad_resets_and_steps_get_clear_errors_and_the_session_goes_on(served):
    env_id, server = served
    with GagpoEnvClient(base_url=server.url).sync() as client:
        with pytest.raises(Exception, match=r"\bcall reset before step\b"):
            client.step("look")
        with pytest.raises(Exception, match="taks"):
            client.reset(taks=0)  # a misspelt option is refused, not ignored
        with pytest.raises(Exception, match="out of range"):
            client.reset(task=10**9)
        with pytest.raises(Exception, match="seed"):
            client.reset(task=0, seed="zero")
        assert client.reset(task=0, seed=0).observation.task_id


def test_gagpo_serve_env_serves_on_loopback_and_refuses_other_addresses(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "gagpo.cli", "serve", "env", "--env", "ALFWorld-v0",
           "--port", str(port), "--max-sessions", "2", "--idle-timeout", "30"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert eventually(lambda: _health(port), timeout=60), proc.stdout
        with GagpoEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as client:
            assert client.reset(task=0).observation.admissible_actions
        # A second server on the same port: a clear error, not uvicorn's log and exit 1.
        taken = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert taken.returncode == 2, taken.stderr
        assert (f"gagpo serve env cannot listen on 127.0.0.1:{port}: port {port} is in use"
                in taken.stderr)
        assert _health(port)  # the first one still serves
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out = subprocess.run(cmd[:-6] + ["--host", "0.0.0.0"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "--allow-remote" in out.stderr


def _health(port: int) -> bool:
    try:
        return json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/health",
                                                timeout=1))["status"] == "healthy"
    except OSError:
        return False


def _post(server, path: str, body: dict) -> dict:
    return _post_url(server.url, path, body)


def _post_url(url: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=30))


def test_the_schema_describes_the_wire_and_episodes_run_over_websockets_only(served):
    """``/schema`` (what clients generate their types from) describes the action's command,
    the observation's text and every info key of the env contract, and the session's state.
    The server runs in OpenEnv's production mode: an episode lives in a WebSocket session;
    OpenEnv's stateless HTTP ``/reset``, ``/step`` and ``/state`` (simulation mode) are not
    served."""
    env_id, server = served
    schema = json.load(urllib.request.urlopen(f"{server.url}/schema", timeout=30))
    assert "command" in schema["action"]["properties"]
    for part in ("observation", "reset_observation"):
        fields = set(schema[part]["properties"])
        assert {"text", "terminated", "truncated", "info", *INFO_KEYS} <= fields, part
    assert {"env_id", "split", "splits", "task_id", "max_action_chars"} <= set(
        schema["state"]["properties"])
    for path, body in (("/reset", {}), ("/step", {"action": {"command": "look"}})):
        with pytest.raises(urllib.error.HTTPError) as e:
            _post(server, path, body)
        assert e.value.code == 404, path
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{server.url}/state", timeout=30)
    assert e.value.code == 404


def test_the_running_server_passes_openenv_validate(served):
    from openenv.cli._validation import validate_running_environment

    env_id, server = served
    report = validate_running_environment(server.url)
    assert report["passed"], [c for c in report["criteria"] if not c["passed"]]
    assert report["mode"] == "production"


def test_the_space_folder_passes_openenv_validates_static_check():
    """The Space folder users deploy passes ``openenv validate`` as OpenEnv's CLI runs it.

    The CLI starts a Python process of its own: under load (a training run and a mutation run
    sharing two cores at the lowest priority) it took over 120 s; a hang still fails."""
    openenv = str(Path(sys.executable).parent / "openenv")
    space = str(Path(__file__).resolve().parent.parent / "examples" / "openenv_space")
    out = subprocess.run([openenv, "validate", space, "--level", "static"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0 and "PASS" in out.stdout, out.stdout + out.stderr


SPACE = Path(__file__).resolve().parent.parent / "examples" / "openenv_space"


def test_the_space_serves_as_deployed_with_its_settings():
    """The Space folder as its container runs it (``uvicorn server.app:app`` inside it): the
    env ``GAGPO_ENV`` names, made with ``GAGPO_ENV_ARGS``, at most ``GAGPO_MAX_SESSIONS``
    sessions, played by the folder's own client and models; a setting that does not parse
    stops the app with its variable's name."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = {"GAGPO_ENV": "WebShop-v0", "GAGPO_ENV_ARGS": '{"goals": "synthetic"}',
                "GAGPO_MAX_SESSIONS": "1", "GAGPO_IDLE_TIMEOUT": "30"}
    cmd = [sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1",
           "--port", str(port)]
    env = dict(os.environ, **settings, PYTHONPATH=str(SPACE))
    proc = subprocess.Popen(cmd, cwd=SPACE, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert eventually(lambda: _health(port), timeout=120), proc.stdout
        url = f"http://127.0.0.1:{port}"
        wanted = gym.make("WebShop-v0", goals="synthetic").unwrapped
        served = _post_url(url, "/WebShop-v0/tasks", {"split": "train"})["tasks"]
        assert len(served) == len(wanted.split_tasks("train"))  # 6,306, not the 484 default
        sys.path.insert(0, str(SPACE))
        try:
            from client import GagpoEnvClient as SpaceClient
            from models import TextAction as SpaceAction
        finally:
            sys.path.remove(str(SPACE))
        obs, info = wanted.reset(seed=0, options={"task": 3, "split": "train"})
        with SpaceClient(base_url=url).sync() as client:
            first = client.reset(task=3, split="train", seed=0).observation
            assert (first.text, first.state_key) == (obs, info["state_key"])
            search = next(a for a in first.admissible_actions if a.startswith("search["))
            step = client.step(SpaceAction(command=search)).observation
            assert step.action_valid and step.state_key != first.state_key
            with (pytest.raises(RuntimeError, match="CAPACITY_REACHED"),
                  SpaceClient(base_url=url).sync() as second):
                second.reset(task=0)
        wanted.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    for name, value in (("GAGPO_ENV_ARGS", "[1]"), ("GAGPO_MAX_SESSIONS", "lots")):
        out = subprocess.run(cmd, cwd=SPACE, env=dict(env, **{name: value}),
                             capture_output=True, text=True, timeout=120)
        assert out.returncode != 0 and f"ValueError: {name}" in out.stderr, out.stderr


@pytest.mark.parametrize("env_id", list(ENVS))
def test_a_truncated_episode_reads_as_truncated_through_openenvs_clients(env_id):
    """An episode that hits the step limit: OpenEnv's ``done`` comes with ``truncated`` (not
    ``terminated``), on the step that hit it and on steps after it, through gagpo's typed
    client and OpenEnv's generic one, as the same env in this process says."""
    from openenv.core.generic_client import GenericEnvClient

    bad, _ = ENVS[env_id]
    limit = 3
    env = gym.make(env_id, max_steps=limit)
    env.reset(seed=4, options={"task": 1})
    want = [env.step(bad)[1:4] for _ in range(limit + 1)]  # (reward, terminated, truncated)
    env.close()
    assert [w[1:] for w in want] == [(False, False)] * (limit - 1) + [(False, True)] * 2
    with running_server(env_id, {"max_steps": limit}, max_sessions=4, idle_timeout=60) as server:
        with GagpoEnvClient(base_url=server.url).sync() as client:
            client.reset(task=1, seed=4)
            got = []
            for _ in range(limit + 1):
                r = client.step(bad)
                o = r.observation
                assert r.done == o.done == (o.terminated or o.truncated)
                got.append((r.reward, o.terminated, o.truncated))
            assert client.state().max_steps == limit
        assert got == want
        with GenericEnvClient(base_url=server.url).sync() as client:
            client.reset(task=1, seed=4)
            raw = [client.step({"command": bad}) for _ in range(limit)]
        assert [r.done for r in raw] == [False] * (limit - 1) + [True]
        assert [(r.observation["terminated"], r.observation["truncated"]) for r in raw] == [
            w[1:] for w in want[:limit]]


def test_the_client_reads_back_what_openenvs_serializer_writes():
    """gagpo's client parses the wire as OpenEnv's server-side serializer writes it (metadata
    included, which it also surfaces at the top level), a minimal payload from a server that
    sends no reward, done or metadata as an unfinished step without a reward, and metadata
    given at the top level only."""
    from openenv.core.env_server.serialization import serialize_observation

    client = GagpoEnvClient(base_url="http://127.0.0.1:9")  # parsing only: never connects
    sent = TextObservation(text="You are in the kitchen.", admissible_actions=["look"],
                           won=True, score=0.5, state_key="ab12", task_id="t", reward=1.0,
                           done=True, terminated=True, metadata={"turn": 3},
                           info={"page": "item"})
    result = client._parse_result(serialize_observation(sent))
    assert result.observation == sent and (result.reward, result.done) == (1.0, True)
    bare = client._parse_result({"observation": {"text": "hi"}})
    assert (bare.reward, bare.done, bare.observation.done) == (None, False, False)
    assert bare.observation.metadata == {} and bare.observation.reward is None
    # The wire's top-level metadata (OpenEnv's documented sibling of the observation) is read
    # where the observation does not repeat it.
    flat = client._parse_result({"observation": {"text": "hi"}, "metadata": {"turn": 3}})
    assert flat.observation.metadata == {"turn": 3}


def test_an_envs_own_info_values_travel_as_json():
    """Info values of a registered env that JSON has no type for reach the client as JSON
    does: NumPy scalars as numbers, arrays as lists (nested), anything else as its text; the
    contract's keys go to their own fields and the server's file paths stay behind."""
    import numpy as np

    from gagpo.integrations.openenv.environment import observation

    env = gym.make("WebShop-v0")
    _, info = env.reset(seed=0, options={"task": 0})
    env.close()
    extra = {"count": np.int64(3), "ratio": np.float32(0.5), "grid": np.arange(4).reshape(2, 2),
             "where": Path("shop") / "item", "flags": (True, None), "gamefile": "/srv/g.tw"}
    obs = observation("text", {**info, **extra}, reward=1.0, terminated=True)
    assert obs.info["count"] == 3 and type(obs.info["count"]) is int
    assert obs.info["ratio"] == 0.5 and obs.info["grid"] == [[0, 1], [2, 3]]
    assert obs.info["where"] == str(Path("shop") / "item") and obs.info["flags"] == [True, None]
    assert "gamefile" not in obs.info and not set(INFO_KEYS) & set(obs.info)
    assert (obs.reward, obs.done, obs.terminated, obs.truncated) == (1.0, True, True, False)
    json.dumps(obs.model_dump())  # all of it is JSON

"""The remote gymnasium env (gagpo.envs.remote): a served env played through ``gym.make`` keeps
the contract (gagpo's checker passes) and gives the in-process transcripts, alone and under
``GroupVectorEnv``, in this process and in worker processes."""

from __future__ import annotations

import gymnasium as gym
import pytest

pytest.importorskip("openenv", reason="needs the openenv extra: pip install 'gagpo[openenv]'")

import gagpo.envs  # noqa: E402, F401
from gagpo.envs.checker import check_env  # noqa: E402
from gagpo.envs.remote import ENV_ID, RemoteEnvError  # noqa: E402
from gagpo.envs.vector import GroupVectorEnv  # noqa: E402
from gagpo.integrations.openenv.server import running_server  # noqa: E402

REMOTE = f"gagpo.envs.remote:{ENV_ID}"
EXPERT = {"request_infos": ["expert_action"]}
BAD = {"WebShop-v0": "click[no such button]", "ALFWorld-v0": "fly to the moon"}


@pytest.fixture(scope="module", params=list(BAD))
def served(request):
    with running_server(request.param, EXPERT, max_sessions=16, idle_timeout=60) as server:
        yield request.param, server


def test_the_remote_env_passes_gagpos_env_checker(served):
    env_id, server = served
    env = gym.make(REMOTE, url=server.url)
    check_env(env)
    local = gym.make(env_id)
    assert env.unwrapped.max_steps == local.unwrapped.max_steps
    assert list(env.unwrapped.splits) == list(local.unwrapped.splits)
    assert env.unwrapped.split_tasks() == list(local.unwrapped.split_tasks())
    env.close()
    local.close()


def test_group_vector_env_plays_served_envs_as_it_plays_local_ones(served):
    """Expert episodes with invalid actions first, in groups of 2 copies; steps after the end
    included (the vector env passes None for ended envs, so we compare per env)."""
    env_id, server = served
    n_bad = [0, 2, 1, 0]

    def transcripts(vec):
        rows = [[] for _ in range(vec.num_envs)]
        obs, infos = vec.reset(tasks=[0, 3], seeds=[5, 6])
        for i in range(vec.num_envs):
            rows[i].append((obs[i], infos[i]["state_key"]))
        t = 0
        while vec.live.any():
            actions = [None if not vec.live[i] else BAD[env_id] if t < n_bad[i]
                       else infos[i]["expert_action"] for i in range(vec.num_envs)]
            obs, rew, term, trunc, infos = vec.step(actions)
            for i in range(vec.num_envs):
                if actions[i] is not None:
                    rows[i].append((obs[i], rew[i], term[i], trunc[i], infos[i]["state_key"],
                                    infos[i]["won"], infos[i]["score"],
                                    infos[i]["admissible_actions"], infos[i]["action_valid"]))
            t += 1
        return rows

    with GroupVectorEnv(env_id, 2, 2, env_kwargs=EXPERT) as vec:
        want = transcripts(vec)
    with GroupVectorEnv(REMOTE, 2, 2, env_kwargs={"url": server.url}) as vec:
        assert transcripts(vec) == want
    with GroupVectorEnv(REMOTE, 2, 2, backend="process", num_workers=2,
                        env_kwargs={"url": server.url}) as vec:
        assert transcripts(vec) == want
    assert any(not r[-1] for rows in want for r in rows[1:])  # invalid actions were played
    assert want[0][0][1] == want[1][0][1]  # copies of a group start in one state


def test_a_closed_remote_env_frees_its_session_and_reset_reopens(served):
    env_id, server = served
    env = gym.make(REMOTE, url=server.url)
    env.reset(options={"task": 0})
    env.close()
    with pytest.raises(RuntimeError):
        env.step("look")
    obs, info = env.reset(seed=1, options={"task": 1})
    assert info["admissible_actions"]
    with pytest.raises(ValueError, match="out of range"):
        env.reset(options={"task": 10**9})
    env.close()


def test_an_unreachable_server_gets_a_clear_error():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RemoteEnvError, match="cannot reach"):
        gym.make(REMOTE, url=f"http://127.0.0.1:{port}", timeout=2)

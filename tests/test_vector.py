"""GroupVectorEnv: groups start and stay identical, episodes end independently, the three
backends give identical transcripts, and a worker that dies (or hangs) costs only its own
live episodes."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator

import gymnasium as gym
import numpy as np
import psutil
import pytest

import gagpo.envs  # noqa: F401  (registers WebShop-v0)
from gagpo.envs.vector import GroupVectorEnv

EXPERT = {"request_infos": ["expert_action"]}
BAD = "click[no such button]"  # rejected by the shop: feedback, reward 0, same state
N_TASKS, G = 4, 2
# Invalid actions each env takes before following the expert, so that episodes end at
# different steps; 15 = never follows it, so the registered TimeLimit truncates it.
N_BAD = [0, 2, 1, 0, 0, 3, 15, 0]


def has_ray() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


BACKENDS = ["process", pytest.param("ray", marks=pytest.mark.skipif(
    not has_ray(), reason="ray is not installed (pip install gagpo[ray])"))]


def children() -> set[int]:
    """Live descendants of this process, bar multiprocessing's resource tracker (a
    per-interpreter helper that spawn starts once and that outlives any one pool)."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(
                    p.cmdline()):
                out.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def gone(pids: list[int], timeout: float = 10.0) -> bool:
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            procs.append(psutil.Process(pid))
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return all(p.status() == psutil.STATUS_ZOMBIE for p in alive if p.is_running())


# Building workers costs a spawn (~0.5 s) or a Ray start (~5 s): each backend's standard
# vector env is built once and shared; a test that closes it gets a fresh one next time.
_VECS: dict[str, tuple[GroupVectorEnv, set[int]]] = {}


def shared_vec(backend: str) -> GroupVectorEnv:
    vec = _VECS.get(backend, (None, None))[0]
    if vec is None or vec._closed:
        before = children()
        vec = GroupVectorEnv("WebShop-v0", N_TASKS, G, backend=backend, num_workers=2,
                             env_kwargs=EXPERT)
        _VECS[backend] = (vec, before)
    return vec


@pytest.fixture(scope="module", autouse=True)
def _close_shared() -> Iterator[None]:
    yield
    for vec, _ in _VECS.values():
        vec.close()


def expert_episode(vec: GroupVectorEnv, tasks: list[int], n_bad: list[int],
                   seeds: list[int] | None = None) -> list[list[tuple]]:
    """Each env takes ``n_bad[i]`` invalid actions, then the expert's; its transcript is the
    reset's (obs, info) followed by one (obs, reward, terminated, truncated, info) a step."""
    obs, infos = vec.reset(tasks, seeds)
    transcripts: list[list[tuple]] = [[(o, inf)] for o, inf in zip(obs, infos, strict=True)]
    last = list(infos)
    t = 0
    while vec.live.any():
        actions = [None if not vec.live[i] else BAD if t < n_bad[i] else last[i]["expert_action"]
                   for i in range(vec.num_envs)]
        was_live = vec.live.copy()
        obs, rew, term, trunc, infos = vec.step(actions)
        for i in np.flatnonzero(was_live):
            transcripts[i].append((obs[i], float(rew[i]), bool(term[i]), bool(trunc[i]),
                                   infos[i]))
            last[i] = infos[i]
        # Not stepped -> nothing returned; ended -> no longer live (and never reset).
        assert all(obs[i] is None and infos[i] is None and rew[i] == 0
                   for i in np.flatnonzero(~was_live))
        np.testing.assert_array_equal(vec.live, was_live & ~term & ~trunc)
        t += 1
    return transcripts


@pytest.fixture(scope="module")
def reference() -> list[list[tuple]]:
    with GroupVectorEnv("WebShop-v0", N_TASKS, G, env_kwargs=EXPERT) as vec:
        return expert_episode(vec, [0, 1, 2, 3], N_BAD)


def test_groups_start_identical_and_stay_identical_under_identical_actions():
    G3 = 3
    with GroupVectorEnv("WebShop-v0", 3, G3, env_kwargs=EXPERT) as vec:
        assert vec.num_envs == 9 and vec.worker_pids() == [os.getpid()]
        obs, infos = vec.reset(tasks=[5, 6, "webshop:7"], seeds=[1, 2, 3])
        for _ in range(2):
            for g in range(3):
                copies = range(g * G3, (g + 1) * G3)
                assert len({obs[i] for i in copies}) == 1
                assert len({infos[i]["state_key"] for i in copies}) == 1
                assert {infos[i]["task_id"] for i in copies} == {f"webshop:{5 + g}"}
            # Different tasks differ (state keys compare states within one task only).
            assert len({obs[g * G3] for g in range(3)}) == 3
            # Every copy takes its group's expert action.
            obs, _, _, _, infos = vec.step([infos[i - i % G3]["expert_action"]
                                            for i in range(9)])
        # One copy taking another path leaves its group's state (and key).
        actions = [infos[i - i % G3]["expert_action"] for i in range(9)]
        actions[1] = "click[back to search]"
        obs, _, _, _, infos = vec.step(actions)
        assert infos[1]["state_key"] != infos[0]["state_key"] == infos[2]["state_key"]


def test_expert_episodes_end_independently_and_are_never_reset(reference):
    lengths = [len(t) - 1 for t in reference]
    assert len(set(lengths)) > 2  # the invalid actions staggered the ends
    for i, transcript in enumerate(reference):
        *_, (obs, reward, terminated, truncated, info) = transcript
        if N_BAD[i] >= 15:  # never bought: the registered TimeLimit cut it at 15 steps
            assert lengths[i] == 15 and truncated and not terminated and reward == 0
        else:
            assert terminated and not truncated and info["won"] and reward == 1.0
            assert all(not row[4]["action_valid"] for row in transcript[1:N_BAD[i] + 1])

    with GroupVectorEnv("WebShop-v0", 1, 2, env_kwargs=EXPERT) as vec:
        _, infos = vec.reset([0])
        while vec.live[0]:  # copy 0 finishes, copy 1 idles on invalid actions
            _, _, _, _, new = vec.step([infos[0]["expert_action"], BAD])
            infos[0] = new[0]
        assert vec.live.tolist() == [False, True]
        with pytest.raises(ValueError, match=r"envs \[0\] are not live"):
            vec.step([BAD, BAD])
        while vec.live.any():
            vec.step([None, BAD])
        # Nothing live: a step is a no-op, nothing restarts behind the caller's back.
        obs, rew, term, trunc, infos = vec.step([None, None])
        assert obs == [None, None] and infos == [None, None] and not rew.any()
        assert not vec.live.any() and not vec.failed.any()


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="backend"):
        GroupVectorEnv("WebShop-v0", 1, 1, backend="threads")
    with pytest.raises(gym.error.Error):
        GroupVectorEnv("NoSuchEnv-v0", 1, 1)
    with GroupVectorEnv("WebShop-v0", 2, 2) as vec:
        with pytest.raises(ValueError, match="reset"):
            vec.step([BAD] * 4)
        with pytest.raises(ValueError, match="2 tasks"):
            vec.reset([0, 1, 2])
        with pytest.raises(ValueError, match="2 seeds"):
            vec.reset([0, 1], seeds=[0])
        vec.reset([0, 1])
        with pytest.raises(ValueError, match="4 actions"):
            vec.step([BAD] * 3)
        with pytest.raises(ValueError, match=r"envs \[2\] are live but got no action"):
            vec.step([BAD, BAD, None, BAD])
        assert vec.live.all()  # a rejected call changes nothing
        with pytest.raises(ValueError, match="out of range"):  # the env's own error
            vec.reset([0, 10**9])
        assert not vec.live.any()
        vec.reset([0, 1])
        assert vec.live.all()
    with pytest.raises(RuntimeError, match="closed"):
        vec.reset([0, 1])


class _FragileEnv(gym.Env):
    """Raises in step on the action "boom" (for the env-error path)."""

    observation_space = action_space = gym.spaces.Text(10)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return "start", {}

    def step(self, action: str):
        if action == "boom":
            raise KeyError("boom")
        return "ok", 0.0, action == "stop", False, {}


def test_an_env_that_raises_in_step_fails_only_its_episode():
    gym.register("VecTestFragile-v0", entry_point=_FragileEnv, disable_env_checker=True)
    try:
        with GroupVectorEnv("VecTestFragile-v0", 1, 3) as vec:
            vec.reset([0])
            with pytest.warns(RuntimeWarning, match="env 1 raised"):
                obs, _, term, trunc, infos = vec.step(["go", "boom", "stop"])
            assert obs == ["ok", None, "ok"] and term.tolist() == [False, False, True]
            assert trunc.tolist() == [False, True, False]
            assert infos[1]["env_error"] and "KeyError" in infos[1]["error"]
            assert vec.live.tolist() == [True, False, False]
            assert vec.failed.tolist() == [False, True, False]
    finally:
        gym.registry.pop("VecTestFragile-v0")


@pytest.mark.parametrize("backend", BACKENDS)
def test_backends_give_identical_transcripts(backend, reference):
    vec = shared_vec(backend)
    pids = vec.worker_pids()
    assert len(set(pids) - {os.getpid()}) == 2
    assert expert_episode(vec, [0, 1, 2, 3], N_BAD) == reference
    assert not vec.failed.any()
    assert expert_episode(vec, [0, 1, 2, 3], N_BAD) == reference  # the same envs, reused
    assert vec.worker_pids() == pids


def _kill_and_recover(vec: GroupVectorEnv, kill: Callable[[GroupVectorEnv, int], None],
                      reference) -> list[int]:
    """Step once, ``kill`` worker 0, check only its live envs fail, finish the others, check
    a reset brings every env back; then kill worker 1 while idle. Returns the victims' pids."""
    hosted = list(vec.worker_envs[0])
    others = [i for i in range(vec.num_envs) if i not in hosted]
    _, infos = vec.reset([0, 1, 2, 3])
    _, _, _, _, infos = vec.step([inf["expert_action"] for inf in infos])
    pids = vec.worker_pids()
    kill(vec, 0)
    obs, rew, term, trunc, new = vec.step([inf["expert_action"] for inf in infos])
    for i in hosted:
        assert obs[i] is None and rew[i] == 0 and trunc[i] and not term[i]
        assert new[i]["worker_failed"] and new[i]["error"]
    assert vec.failed.tolist() == [i in hosted for i in range(vec.num_envs)]
    assert not vec.live[hosted].any()
    # The other worker's episodes go on to the end, exactly as without the failure.
    for i in others:
        assert obs[i] == reference_expert_row(reference, i, 2)
    last = dict(enumerate(new))
    while vec.live.any():
        _, _, _, _, new = vec.step([last[i]["expert_action"] if vec.live[i] else None
                                    for i in range(vec.num_envs)])
        last.update((i, inf) for i, inf in enumerate(new) if inf is not None)
    assert all(last[i]["won"] for i in others)
    assert vec.worker_pids()[0] != pids[0] and vec.worker_pids()[1] == pids[1]
    # The replacement serves the next episodes; nothing is failed any more.
    transcripts = expert_episode(vec, [0, 1, 2, 3], [0] * vec.num_envs)
    assert not vec.failed.any()
    assert all(t[-1][4]["won"] for t in transcripts)
    # A worker that dies between episodes costs nothing: reset replaces it and retries.
    idle = vec.worker_pids()[1]
    kill(vec, 1)
    vec.reset([0, 1, 2, 3])
    assert vec.live.all() and not vec.failed.any() and vec.worker_pids()[1] != idle
    return [pids[0], idle]


def reference_expert_row(reference, i: int, t: int) -> str:
    """The observation env ``i`` reaches after ``t`` expert steps from its task's start (the
    reference transcripts are of the expert too, for envs with no invalid actions)."""
    j = next(j for j in range(len(N_BAD)) if N_BAD[j] == 0 and j // G == i // G)
    return reference[j][t][0]


def sigkill(vec: GroupVectorEnv, k: int) -> None:
    pid = vec.worker_pids()[k]
    os.kill(pid, signal.SIGKILL)
    assert gone([pid])


def sigstop(vec: GroupVectorEnv, k: int) -> None:
    """Freeze the worker: it stays alive but never answers."""
    os.kill(vec.worker_pids()[k], signal.SIGSTOP)


def ray_kill(vec: GroupVectorEnv, k: int) -> None:
    import ray

    # ray.kill only asks the raylet; wait until the process is really dead, or the next call
    # can still reach it (the test is about a worker that has died, not one that is dying).
    pid = vec.worker_pids()[k]
    ray.kill(vec._workers.actors()[k])
    assert gone([pid])


@pytest.mark.parametrize("backend, kill", [("process", sigkill), ("ray", sigkill),
                                           ("ray", ray_kill)],
                         ids=["process-SIGKILL", "ray-SIGKILL", "ray-ray.kill"])
def test_a_killed_worker_fails_its_live_episodes_and_is_replaced(backend, kill, reference):
    if backend == "ray" and not has_ray():
        pytest.skip("ray is not installed (pip install gagpo[ray])")
    vec = shared_vec(backend)
    assert gone(_kill_and_recover(vec, kill, reference))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dead_worker_keeps_the_result_of_an_episode_that_had_ended(backend):
    """Env 0 wins; then its worker dies while hosting live episodes. Those fail; env 0's
    episode had ended before the crash and keeps its result: not failed, not stepped."""
    vec = shared_vec(backend)
    hosted = list(vec.worker_envs[0])
    assert len(hosted) > 1 and hosted[0] == 0
    _, infos = vec.reset([0, 1, 2, 3])
    last = dict(enumerate(infos))
    while vec.live[0]:  # env 0 follows the expert; the others mark time with invalid actions
        _, rew, term, _, new = vec.step([None if not vec.live[i] else
                                         last[i]["expert_action"] if i == 0 else BAD
                                         for i in range(vec.num_envs)])
        last.update((i, inf) for i, inf in enumerate(new) if inf is not None)
    assert term[0] and rew[0] == 1.0 and last[0]["won"]
    assert vec.live.tolist() == [i != 0 for i in range(vec.num_envs)]
    pid = vec.worker_pids()[0]
    sigkill(vec, 0)
    obs, rew, term, trunc, new = vec.step([BAD if vec.live[i] else None
                                           for i in range(vec.num_envs)])
    assert vec.failed.tolist() == [i in hosted[1:] for i in range(vec.num_envs)]
    assert (obs[0], new[0], rew[0], term[0], trunc[0]) == (None, None, 0.0, False, False)
    for i in hosted[1:]:
        assert trunc[i] and new[i]["worker_failed"] and not vec.live[i]
    for i in range(len(hosted), vec.num_envs):
        assert vec.live[i] and new[i]["action_valid"] is False and not trunc[i]
    assert vec.worker_pids()[0] != pid
    vec.reset([0, 1, 2, 3])  # the replacement serves the next episodes
    assert vec.live.all() and not vec.failed.any()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hung_worker_times_out_and_is_replaced(backend, reference):
    vec = shared_vec(backend)
    vec.step_timeout = 1.0  # a fresh worker still gets 60 s to build its envs
    try:
        victims = _kill_and_recover(vec, sigstop, reference)
    finally:
        vec.step_timeout = 120.0
    assert gone(victims)  # killed, not left frozen


def tree(pids: list[int]) -> set[int]:
    """``pids`` and all their descendants."""
    out = set()
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            out |= {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
    return out


def test_close_leaves_no_child_processes():
    mine = {c.pid for c in psutil.Process().children()}
    with GroupVectorEnv("WebShop-v0", 1, 2, backend="process", num_workers=2) as vec:
        vec.reset([0])
        pids = vec.worker_pids()
        assert set(pids) <= {c.pid for c in psutil.Process().children()}
        workers = tree(pids)
    vec.close()  # twice is fine
    assert gone(list(workers))
    assert gone(list({c.pid for c in psutil.Process().children()} - mine - tree(
        [c.pid for c in psutil.Process().children()
         if "resource_tracker" in " ".join(c.cmdline())])))


@pytest.mark.skipif(not has_ray(), reason="ray is not installed (pip install gagpo[ray])")
def test_close_shuts_down_the_ray_it_started():
    import ray

    vec = shared_vec("ray")
    _, before = _VECS["ray"]
    actors = vec.worker_pids()
    # Processes of the other shared vector env are not this test's business.
    others = set().union(*(tree(v.worker_pids()) for b, (v, _) in _VECS.items()
                           if b != "ray" and not v._closed))
    vec.close()
    assert not ray.is_initialized()
    assert gone(actors)
    assert gone(list(children() - before - others))


def test_missing_ray_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail
    with pytest.raises(ImportError, match=r"pip install gagpo\[ray\]"):
        GroupVectorEnv("WebShop-v0", 1, 1, backend="ray")

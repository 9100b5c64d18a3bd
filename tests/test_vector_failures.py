"""What a failed episode tells the caller: the worker's fate (which signal killed it) and an
env's own traceback, whole, so that a failure in a long run can be diagnosed from its infos."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import TypeVar

import gymnasium as gym
import psutil
import pytest
from test_vector import _FragileEnv  # raises on "boom"; shared with the vector env's tests

import gagpo.envs  # noqa: F401
from gagpo.envs import vector
from gagpo.envs.vector import GroupVectorEnv, _build_timeout

T = TypeVar("T")
BAD = "click[no such button]"  # rejected by the shop: feedback, reward 0, same state


def _wait_dead(pid: int, timeout: float = 10.0) -> None:
    """Until the worker ``pid`` has exited: a zombie, left for its parent (the vector env) to
    reap, which reads its exit code."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)


def _call_noting_caller(call: Callable[[], T], module: ModuleType) -> tuple[tuple[str, int], T]:
    """``call()``'s result, with the file and line of the frame that first called into
    ``module``'s code: where a warning with stacklevel 2 from that code must point. It is the
    caller's own line, or a wrapper's (mutmut's trampoline, under ``make mutate``)."""
    caller: list[tuple[str, int]] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and not caller and frame.f_code.co_filename == module.__file__:
            caller.append((frame.f_back.f_code.co_filename, frame.f_back.f_lineno))

    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    return caller[0], result


def test_a_killed_worker_is_reported_with_its_signal():
    with GroupVectorEnv("WebShop-v0", 2, 1, backend="process", num_workers=2) as vec:
        vec.reset([0, 1])
        pid = vec.worker_pids()[0]
        os.kill(pid, signal.SIGKILL)
        _wait_dead(pid)
        _, _, _, trunc, infos = vec.step([BAD, BAD])
        assert trunc[0] and infos[0]["worker_failed"]
        # Found dead when the step is sent (a broken pipe) or when its answer is awaited.
        error = infos[0]["error"]
        assert error.startswith(f"env worker 0 (pid {pid}) ")
        assert error.endswith(f" (killed by signal {int(signal.SIGKILL)})")
        assert not trunc[1] and infos[1]["action_valid"] is False  # the other worker's env


def test_an_env_error_carries_the_whole_traceback():
    gym.register("VecFailFragile-v0", entry_point=_FragileEnv, disable_env_checker=True)
    try:
        with GroupVectorEnv("VecFailFragile-v0", 1, 2) as vec:
            vec.reset([0])
            with pytest.warns(RuntimeWarning) as record:
                caller, (_, _, _, trunc, infos) = _call_noting_caller(
                    lambda: vec.step(["go", "boom"]), vector)
            assert (record[0].filename, record[0].lineno) == caller  # the caller's step
            error = infos[1]["error"]
            assert trunc[1] and infos[1]["env_error"]
            assert infos[1]["worker_failed"] is False  # the worker itself is fine
            assert error.startswith("Traceback (most recent call last):\n  File ")
            assert "in step\n" in error and error.endswith("KeyError: 'boom'\n")
    finally:
        gym.registry.pop("VecFailFragile-v0")


class _Unpicklable(Exception):
    """Holds a lock, so it cannot travel back from a worker process."""

    def __init__(self) -> None:
        super().__init__("holds a lock")
        self.lock = threading.Lock()


class _UnpicklableEnv(_FragileEnv):
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        raise _Unpicklable()


def test_an_exception_that_does_not_pickle_arrives_as_its_traceback():
    """Workers send back only exceptions that pickle; one that does not is re-raised, on every
    backend alike, as a RuntimeError holding the env's traceback."""
    gym.register("VecFailUnpicklable-v0", entry_point=_UnpicklableEnv, disable_env_checker=True)
    try:
        with GroupVectorEnv("VecFailUnpicklable-v0", 1, 2) as vec:
            with pytest.raises(RuntimeError, match=r"^env 0 \(task 7\) raised in reset:\n") as e:
                vec.reset([7])
            assert str(e.value).endswith("_Unpicklable: holds a lock\n")
            assert not vec.live.any()
    finally:
        gym.registry.pop("VecFailUnpicklable-v0")


class _ExitsWhenBuilt(gym.Env):
    """Calls sys.exit() while it is built: its worker ends with exit code 0."""

    observation_space = action_space = gym.spaces.Text(10)

    def __init__(self) -> None:
        sys.exit(0)


# Registered at import: a worker builds "<this module>:VecFailExits-v0" by importing it.
if "VecFailExits-v0" not in gym.registry:
    gym.register("VecFailExits-v0", entry_point=_ExitsWhenBuilt, disable_env_checker=True)


def test_a_worker_that_exits_while_building_its_envs_is_reported_with_a_hint():
    """Exit code 0 is no signal; a worker lost while building its envs gets the hint about
    scripts that make envs at import time (spawned workers import the main module)."""
    with pytest.raises(RuntimeError) as e:
        GroupVectorEnv(f"{__name__}:VecFailExits-v0", 1, 1, backend="process", num_workers=1)
    assert str(e.value).endswith(
        " died (exit code 0). Workers are spawned: a script that makes this env at import time "
        "must guard its code with `if __name__ == '__main__':`")
    # "module:Id" with an id the module does not register fails before any worker starts.
    with pytest.raises(gym.error.Error, match="VecFailNoSuch"):
        GroupVectorEnv(f"{__name__}:VecFailNoSuch-v0", 1, 1, backend="process")


def test_misuse_of_step_is_refused_with_the_whole_message():
    gym.register("VecFailMisuse-v0", entry_point=_FragileEnv, disable_env_checker=True)
    try:
        with GroupVectorEnv("VecFailMisuse-v0", 1, 2) as vec:
            with pytest.raises(ValueError, match=r"^call reset\(\) before step\(\)$"):
                vec.step(["go", "go"])
            vec.reset([0])
            with pytest.warns(RuntimeWarning):
                vec.step(["go", "boom"])  # env 1 raised: failed, no longer live
            with pytest.raises(ValueError, match=r"^envs \[1\] are not live \(episode ended or "
                               r"failed\) but got an action; pass None for them$"):
                vec.step(["go", "go"])
    finally:
        gym.registry.pop("VecFailMisuse-v0")


class _HangsEnv(_FragileEnv):
    """Never answers the action "hang"."""

    def step(self, action: str):
        if action == "hang":
            threading.Event().wait()  # its worker is killed at the step timeout
        return super().step(action)


if "VecFailHangs-v0" not in gym.registry:
    gym.register("VecFailHangs-v0", entry_point=_HangsEnv, disable_env_checker=True)


def test_a_built_worker_gets_the_step_timeout_not_the_build_allowance():
    """Only building a worker's envs gets the longer allowance; once built, a step that does
    not come back within step_timeout costs its episode, with the timeout in the error."""
    with GroupVectorEnv(f"{__name__}:VecFailHangs-v0", 1, 1, backend="process",
                        num_workers=1) as vec:
        vec.reset([0])
        pid = vec.worker_pids()[0]
        vec.step_timeout = 1.0
        _, _, _, trunc, infos = vec.step(["hang"])
        assert trunc[0] and infos[0]["worker_failed"] and vec.failed[0]
        assert infos[0]["error"] == (f"env worker 0 (pid {pid}) did not answer within 1 s "
                                     "(step_timeout=1.0)")


def test_building_envs_gets_at_least_a_minute():
    """As documented for step_timeout: building a worker's envs (imports, data) gets
    max(step_timeout, 60) seconds, so a short step timeout does not fail slow starts."""
    assert _build_timeout(1.0) == 60.0
    assert _build_timeout(300.0) == 300.0


class _DiesOnReset(_FragileEnv):
    """Ends its worker process (exit code 3) when reset with the task "die"."""

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if (options or {}).get("task") == "die":
            os._exit(3)
        return super().reset(seed=seed, options=options)


if "VecFailDies-v0" not in gym.registry:
    gym.register("VecFailDies-v0", entry_point=_DiesOnReset, disable_env_checker=True)


def test_a_worker_that_dies_in_reset_twice_fails_only_its_envs():
    """A worker found dead at reset is replaced and the reset retried once; dead again, its
    envs come back failed, with the worker's fate in their infos, and the others start."""
    with GroupVectorEnv(f"{__name__}:VecFailDies-v0", 2, 1, backend="process",
                        num_workers=2) as vec:
        pid = vec.worker_pids()[0]
        os.kill(pid, signal.SIGKILL)
        _wait_dead(pid)  # found dead when the reset is sent; its replacement dies in reset
        obs, infos = vec.reset(["die", 0])
        assert obs == [None, "start"] and vec.failed.tolist() == [True, False]
        assert vec.live.tolist() == [False, True]
        assert infos[0]["worker_failed"] is True
        assert infos[0]["error"].startswith("env worker 0 (pid ")
        assert infos[0]["error"].endswith(" died (exit code 3)")
        assert infos[1] == {}
        assert pid not in vec.worker_pids()


class _RaisesInReset(_FragileEnv):
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        raise KeyError(options["task"])


def test_an_env_error_in_reset_is_reraised_with_the_env_and_task_as_cause():
    gym.register("VecFailResetRaises-v0", entry_point=_RaisesInReset, disable_env_checker=True)
    try:
        with GroupVectorEnv("VecFailResetRaises-v0", 2, 1) as vec:
            with pytest.raises(KeyError) as e:
                vec.reset(["a", "b"])  # both raise: the first env's error is the one raised
            assert e.value.args == ("a",) and not vec.live.any()
            cause = str(e.value.__cause__)
            assert cause.startswith("env 0 (task 'a') raised in reset:\nTraceback ")
            assert cause.endswith("KeyError: 'a'\n")
    finally:
        gym.registry.pop("VecFailResetRaises-v0")


class _SlowToBuild(_FragileEnv):
    def __init__(self) -> None:
        time.sleep(0.5)


if "VecFailSlowBuild-v0" not in gym.registry:
    gym.register("VecFailSlowBuild-v0", entry_point=_SlowToBuild, disable_env_checker=True)


def test_a_short_step_timeout_does_not_fail_a_slow_build():
    """Building a worker's envs gets its own allowance (at least a minute), not step_timeout."""
    with GroupVectorEnv(f"{__name__}:VecFailSlowBuild-v0", 1, 1, backend="process",
                        num_workers=1, step_timeout=0.1) as vec:
        vec.step_timeout = 120.0  # for the reset: only the build is under test
        assert vec.reset([0])[0] == ["start"]


class _NeverBuilt(_FragileEnv):
    def __init__(self) -> None:
        threading.Event().wait()  # its worker is killed when the build allowance runs out


if "VecFailNeverBuilt-v0" not in gym.registry:
    gym.register("VecFailNeverBuilt-v0", entry_point=_NeverBuilt, disable_env_checker=True)


def test_a_worker_that_does_not_build_its_envs_in_time_is_named_as_such(monkeypatch):
    """A build that outlasts its allowance reads as one ("did not build its envs"), not as a
    late answer; the allowance is shortened here (it is at least a minute)."""
    monkeypatch.setattr(vector, "_build_timeout", lambda step_timeout: 1.0)
    with pytest.raises(RuntimeError) as e:
        GroupVectorEnv(f"{__name__}:VecFailNeverBuilt-v0", 1, 1, backend="process",
                       num_workers=1, step_timeout=0.5)
    assert re.fullmatch(r"env worker 0 \(pid \d+\) did not build its envs within 1 s "
                        r"\(step_timeout=0\.5\)", str(e.value))


def test_a_worker_that_cannot_build_its_envs_says_so_and_chains_the_env_error():
    """The constructor's error names the build as what failed, carries the worker's traceback
    and has the env's own exception as its cause (for ``except`` clauses and debuggers)."""
    with pytest.raises(RuntimeError) as e:
        GroupVectorEnv("WebShop-v0", 1, 1, backend="process", env_kwargs={"no_such_kwarg": 1})
    message = str(e.value)
    assert re.match(r"env worker 0 \(pid \d+\) failed to build its envs:\nTraceback ", message)
    assert isinstance(e.value.__cause__, TypeError)
    assert "no_such_kwarg" in str(e.value.__cause__)


class _AnswersWithALock(_FragileEnv):
    """Answers the action "lock" with an info that cannot be pickled (it holds a lock)."""

    def step(self, action: str):
        if action == "lock":
            return "ok", 0.0, False, False, {"lock": threading.Lock()}
        return super().step(action)


if "VecFailLock-v0" not in gym.registry:
    gym.register("VecFailLock-v0", entry_point=_AnswersWithALock, disable_env_checker=True)


def test_an_answer_that_cannot_be_sent_back_fails_its_workers_episodes_with_the_reason():
    """A worker whose answer does not pickle is alive and built: its episodes are failed with
    "failed" and the reason, not reported as a worker that could not build its envs."""
    with GroupVectorEnv(f"{__name__}:VecFailLock-v0", 2, 1, backend="process",
                        num_workers=2) as vec:
        vec.reset([0, 1])
        pid = vec.worker_pids()[0]
        _, _, _, trunc, infos = vec.step(["lock", "go"])
        assert trunc.tolist() == [True, False] and vec.failed.tolist() == [True, False]
        assert infos[0]["worker_failed"] is True
        assert infos[0]["error"] == (f"env worker 0 (pid {pid}) failed:\ncannot send the answer "
                                     "back: TypeError(\"cannot pickle '_thread.lock' object\")")
        assert infos[1] == {}


class _SlowEnv(_FragileEnv):
    """Takes two seconds over the action "slow"."""

    def step(self, action: str):
        if action == "slow":
            time.sleep(2.0)
        return super().step(action)


if "VecFailSlow-v0" not in gym.registry:
    gym.register("VecFailSlow-v0", entry_point=_SlowEnv, disable_env_checker=True)


def test_waiting_for_a_slow_worker_does_not_spin():
    """While one worker is still busy and another has answered, the driver blocks in
    ``connection.wait`` instead of polling: a trainer's driver process must not burn a core
    for every slow env step."""
    with GroupVectorEnv(f"{__name__}:VecFailSlow-v0", 2, 1, backend="process",
                        num_workers=2) as vec:
        vec.reset([0, 1])
        wall, cpu = time.monotonic(), time.process_time()
        obs, *_ = vec.step(["slow", "go"])
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    assert obs == ["ok", "ok"] and wall >= 2.0
    assert cpu < 0.5, f"the driver used {cpu:.2f} s of CPU while waiting {wall:.2f} s"

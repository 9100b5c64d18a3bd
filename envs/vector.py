"""Group rollouts: N tasks x G copies of any registered environment, stepped as one batch.

GRPO-style trainers compare G attempts at one task, so :class:`GroupVectorEnv` resets the G
copies of a group to the same task and seed (they start identical, and stay identical under
identical actions). Episodes end independently: an env whose episode ended is no longer
*live*, takes ``None`` as its action and is never reset behind the caller's back.

The envs live in one of three backends, all giving the same transcripts:

``"inprocess"``
    every env in this process (no overhead; the default).
``"process"``
    worker processes (``spawn`` context: ``fork`` is unsafe once torch or threads exist),
    each hosting a contiguous slice of envs and stepping its whole slice per message.
``"ray"``
    one Ray actor per slice, on this machine (``ray.init()``) or a cluster (``ray_address``).
    Needs the optional extra: ``pip install gagpo[ray]``.

Each worker builds its envs once, with ``gym.make(env_id, **env_kwargs)`` (so the registered
``TimeLimit`` applies), and reuses them for every episode. A worker that dies, or takes more
than ``step_timeout`` seconds to answer, costs only its live episodes: they are marked
``failed``, a fresh worker replaces it, and the run goes on.

Example::

    import gagpo.envs
    from gagpo.envs.vector import GroupVectorEnv

    with GroupVectorEnv("WebShop-v0", n_tasks=8, group_size=4, backend="process") as vec:
        obs, infos = vec.reset(tasks=range(8))
        while vec.live.any():
            actions = [policy(o) if live else None for o, live in zip(obs, vec.live)]
            obs, rewards, terminated, truncated, infos = vec.step(actions)
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing as mp
import os
import pickle
import signal
import time
import traceback
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

__all__ = ["BACKENDS", "GroupVectorEnv"]

BACKENDS = ("inprocess", "process", "ray")

Transition = tuple[str, float, bool, bool, dict[str, Any]]


# ---------------------------------------------------------------------------------------------
# The worker side: a slice of envs, the same code in every backend.


@dataclass
class _EnvError:
    """An exception raised by one env's reset or step, carried back from a worker."""

    message: str  # the formatted traceback
    exception: BaseException | None  # the exception itself when it pickles, for re-raising


@dataclass
class _WorkerLost:
    """A worker that died or did not answer in time."""

    message: str
    cause: BaseException | None = None


def _build_timeout(step_timeout: float) -> float:
    """Seconds a worker may take to build its envs (imports and data loading included)."""
    return max(step_timeout, 60.0)


class _EnvSlice:
    """Hosts a contiguous slice of envs: built once, reset and stepped in batches.

    Runs inside a worker (or this process for ``"inprocess"``). Exceptions of one env are
    caught and returned as :class:`_EnvError` so that they never take the other envs down
    and never look like a dead worker.
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], n_envs: int) -> None:
        self.envs = [gym.make(env_id, **env_kwargs) for _ in range(n_envs)]

    def reset(self, requests: list[tuple[int, Any, int]]) -> list[tuple[str, dict] | _EnvError]:
        """``requests``: ``(local index, task, seed)``; answers ``(obs, info)`` in order."""
        out: list[tuple[str, dict] | _EnvError] = []
        for j, task, seed in requests:
            try:
                out.append(self.envs[j].reset(seed=seed, options={"task": task}))
            except Exception as e:  # reported to the caller, who re-raises
                out.append(_env_error(e))
        return out

    def step(self, requests: list[tuple[int, Any]]) -> list[Transition | _EnvError]:
        """``requests``: ``(local index, action)``; answers transitions in order."""
        out: list[Transition | _EnvError] = []
        for j, action in requests:
            try:
                obs, reward, terminated, truncated, info = self.envs[j].step(action)
                out.append((obs, float(reward), bool(terminated), bool(truncated), info))
            except Exception as e:  # that episode fails; the others go on
                out.append(_env_error(e))
        return out

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        for env in self.envs:
            with contextlib.suppress(Exception):  # closing is best effort
                env.close()


def _env_error(e: BaseException) -> _EnvError:
    message = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    try:  # the exception travels only if it survives pickling (workers send it by pipe)
        pickle.loads(pickle.dumps(e))
        exception: BaseException | None = e.with_traceback(None)
    except Exception:
        exception = None
    return _EnvError(message, exception)


def _process_worker(conn: Connection, env_id: str, env_kwargs: dict, n_envs: int) -> None:
    """Main loop of a worker process: build the slice, then answer one message at a time."""
    # Ctrl-C reaches the whole process group; the parent handles it and closes us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        envs = _EnvSlice(env_id, env_kwargs, n_envs)
    except Exception as e:
        conn.send(("error", None, _env_error(e)))
        return
    conn.send(("ready", None, os.getpid()))
    try:
        while True:
            try:
                seq, method, payload = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                break
            if method == "close":
                break
            answer = getattr(envs, method)(payload)
            try:  # pickling happens before writing: a failure here leaves the pipe intact
                conn.send(("ok", seq, answer))
            except (pickle.PicklingError, TypeError, AttributeError) as e:
                conn.send(("error", seq, _EnvError(f"cannot send the answer back: {e!r}", None)))
    finally:
        envs.close()
        conn.close()


# ---------------------------------------------------------------------------------------------
# The driver side: one small class per backend, all with the same five methods.


class _Workers(Protocol):
    def submit(self, k: int, method: str, payload: Any) -> None:
        """Send ``method(payload)`` to worker ``k`` without waiting for the answer."""

    def collect(self, ks: Sequence[int], timeout: float) -> dict[int, Any]:
        """The answers of workers ``ks``, or :class:`_WorkerLost` for dead or late ones."""

    def restart(self, k: int) -> None:
        """Replace worker ``k`` by a fresh one (building its envs anew)."""

    def pids(self) -> list[int]: ...

    def close(self) -> None: ...


class _InProcessWorkers:
    """One slice of all envs in this process; calls run at submit time."""

    def __init__(self, env_id: str, env_kwargs: dict, sizes: list[int]) -> None:
        self._args = (env_id, env_kwargs)
        self._slices = [_EnvSlice(env_id, env_kwargs, n) for n in sizes]
        self._answers: dict[int, Any] = {}

    def submit(self, k: int, method: str, payload: Any) -> None:
        self._answers[k] = getattr(self._slices[k], method)(payload)

    def collect(self, ks: Sequence[int], timeout: float) -> dict[int, Any]:
        return {k: self._answers.pop(k) for k in ks}

    def restart(self, k: int) -> None:
        self._slices[k].close()
        self._slices[k] = _EnvSlice(*self._args, len(self._slices[k].envs))

    def pids(self) -> list[int]:
        return [os.getpid()] * len(self._slices)

    def close(self) -> None:
        for s in self._slices:
            s.close()


class _ProcessWorkers:
    """Worker processes talking over pipes; waits with ``connection.wait``, never sleeps."""

    def __init__(self, env_id: str, env_kwargs: dict, sizes: list[int], timeout: float) -> None:
        self._ctx = mp.get_context("spawn")
        self._args = (env_id, env_kwargs)
        self._sizes = sizes
        self._procs: list[Any] = [None] * len(sizes)
        self._conns: list[Connection] = [None] * len(sizes)  # type: ignore[list-item]
        self._booting: set[int] = set()  # started, "ready" not read yet
        self._lost: dict[int, _WorkerLost] = {}  # found dead while sending
        # Requests are numbered: an answer left unread by an interrupted call (Ctrl-C in
        # collect) is recognised as stale and dropped instead of answering the next call.
        self._seq = 0
        self._expected: dict[int, int] = {}
        for k in range(len(sizes)):
            self._start(k)
        # Wait for every worker to build its envs, so that construction errors surface here.
        for answer in self.collect(range(len(sizes)), timeout).values():
            if isinstance(answer, _WorkerLost):
                self.close()
                raise RuntimeError(answer.message) from answer.cause

    def _start(self, k: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(
            target=_process_worker, args=(child, *self._args, self._sizes[k]),
            name=f"gagpo-env-worker-{k}", daemon=True,
        )
        proc.start()
        child.close()  # so that the worker's death reads as EOF here
        self._procs[k], self._conns[k] = proc, parent
        self._booting.add(k)
        self._expected[k] = 0  # until a request is sent, "ready" is the awaited answer
        self._lost.pop(k, None)

    def submit(self, k: int, method: str, payload: Any) -> None:
        self._seq += 1
        self._expected[k] = self._seq
        try:
            self._conns[k].send((self._seq, method, payload))
        except (OSError, ValueError) as e:  # BrokenPipeError: it died since the last call
            self._lost[k] = _WorkerLost(self._death(k, f"cannot be sent to ({e!r})"))

    def collect(self, ks: Sequence[int], timeout: float) -> dict[int, Any]:
        out: dict[int, Any] = {k: self._lost.pop(k) for k in ks if k in self._lost}
        now = time.monotonic()
        # A fresh worker first builds its envs, which gets its own (longer) allowance.
        deadline = {k: now + (_build_timeout(timeout) if k in self._booting else timeout)
                    for k in ks if k not in out}
        while deadline:
            remaining = min(deadline.values()) - time.monotonic()
            waiting = list(deadline)
            objects = [self._conns[k] for k in waiting] + [self._procs[k].sentinel for k in waiting]
            ready = set(wait(objects, max(remaining, 0)))
            for k in waiting:
                conn = self._conns[k]
                if conn not in ready and self._procs[k].sentinel not in ready:
                    if time.monotonic() >= deadline[k]:
                        what = "build its envs" if k in self._booting else "answer"
                        out[k] = _WorkerLost(f"env worker {k} (pid {self._procs[k].pid}) did "
                                             f"not {what} within {deadline[k] - now:.0f} s "
                                             f"(step_timeout={timeout})")
                        del deadline[k]
                        self._kill(k)
                    continue
                try:
                    # An answer written just before dying is still read; then EOF.
                    if not conn.poll():
                        raise EOFError
                    tag, seq, value = conn.recv()
                except (EOFError, OSError):
                    out[k] = _WorkerLost(self._death(k, "died"))
                    del deadline[k]
                    continue
                if tag == "ready":  # built: the answer itself is due within step_timeout
                    self._booting.discard(k)
                    deadline[k] = time.monotonic() + timeout
                    if self._expected[k] == 0:
                        out[k] = None
                        del deadline[k]
                elif seq is None or seq == self._expected[k]:  # else a stale answer: dropped
                    what = "failed to build its envs" if seq is None else "failed"
                    out[k] = value if tag == "ok" else _WorkerLost(
                        f"env worker {k} (pid {self._procs[k].pid}) {what}:\n{value.message}",
                        value.exception)
                    del deadline[k]
        return out

    def _death(self, k: int, what: str) -> str:
        proc = self._procs[k]
        proc.join(timeout=1.0)  # reap it, for its exit code
        code = proc.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        hint = ""
        if k in self._booting:
            hint = (". Workers are spawned: a script that makes this env at import time must "
                    "guard its code with `if __name__ == '__main__':`")
        return f"env worker {k} (pid {proc.pid}) {what} ({how}){hint}"

    def _kill(self, k: int) -> None:
        proc = self._procs[k]
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=5.0)
        self._conns[k].close()

    def restart(self, k: int) -> None:
        self._kill(k)
        self._start(k)  # builds its envs in the background; answers after "ready"

    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def close(self) -> None:
        for k, conn in enumerate(self._conns):
            if conn is not None and self._procs[k].is_alive():
                with contextlib.suppress(OSError, ValueError):
                    conn.send((0, "close", None))
        for k, proc in enumerate(self._procs):
            if proc is None:
                continue
            proc.join(timeout=5.0)  # a clean exit closes the worker's envs
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5.0)
            self._conns[k].close()


class _RayWorkers:
    """One Ray actor per slice; ``ray.wait`` with deadlines, actor deaths seen as errors."""

    def __init__(
        self, env_id: str, env_kwargs: dict, sizes: list[int], timeout: float,
        address: str | None,
    ) -> None:
        try:
            import ray
        except ImportError:
            raise ImportError(
                "backend='ray' needs Ray, an optional extra: pip install gagpo[ray]"
            ) from None
        self._ray = ray
        self._owns_ray = False
        remote = address is not None or bool(os.environ.get("RAY_ADDRESS"))
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if not remote:
                kwargs["num_cpus"] = os.cpu_count() or 1  # only a local instance takes it
            ray.init(address=address, **kwargs)
            self._owns_ray = True
        # We replace dead actors ourselves (fresh envs, episode marked failed): no Ray restarts.
        # On a cluster, spread the slices over the nodes instead of packing the first one.
        options: dict[str, Any] = {"max_restarts": 0, "max_task_retries": 0}
        if remote:
            options["scheduling_strategy"] = "SPREAD"
        self._cls = ray.remote(_EnvSlice).options(**options)
        self._args = (env_id, env_kwargs)
        self._sizes = sizes
        self._timeout = timeout
        self._actors: list[Any] = [None] * len(sizes)
        self._pids: list[int | None] = [None] * len(sizes)
        self._booting: dict[int, Any] = {}  # worker -> ref of its first answer (its pid)
        self._refs: dict[int, Any] = {}
        for k in range(len(sizes)):
            self._start(k)
        # Wait for every actor to build its envs, so that construction errors surface here.
        for lost in self._await_boot(range(len(sizes)), timeout).values():
            self.close()
            raise RuntimeError(lost.message) from lost.cause

    def _start(self, k: int) -> None:
        self._actors[k] = self._cls.remote(*self._args, self._sizes[k])
        self._booting[k] = self._actors[k].pid.remote()  # answered once its envs are built
        self._pids[k] = None

    def _await_boot(self, ks: Sequence[int], timeout: float) -> dict[int, _WorkerLost]:
        """Wait for fresh actors among ``ks`` to be built (their own, longer, allowance)."""
        ray = self._ray
        k_of = {self._booting.pop(k): k for k in ks if k in self._booting}
        if not k_of:
            return {}
        allowance = _build_timeout(timeout)
        ready, late = ray.wait(list(k_of), num_returns=len(k_of), timeout=allowance)
        lost: dict[int, _WorkerLost] = {}
        for ref in ready:
            k = k_of[ref]
            try:
                self._pids[k] = ray.get(ref)
            except ray.exceptions.RayError as e:
                lost[k] = _WorkerLost(f"env actor {k} failed to build its envs: {e}", e)
        for ref in late:
            k = k_of[ref]
            lost[k] = _WorkerLost(f"env actor {k} did not build its envs within {allowance:.0f} s")
            ray.kill(self._actors[k], no_restart=True)
        return lost

    def submit(self, k: int, method: str, payload: Any) -> None:
        self._refs[k] = getattr(self._actors[k], method).remote(payload)

    def collect(self, ks: Sequence[int], timeout: float) -> dict[int, Any]:
        ray = self._ray
        out: dict[int, Any] = self._await_boot(ks, timeout)
        k_of = {self._refs.pop(k): k for k in ks if k not in out}
        for k in out:
            self._refs.pop(k, None)
        if not k_of:
            return out
        ready, late = ray.wait(list(k_of), num_returns=len(k_of), timeout=timeout)
        for ref in ready:
            k = k_of[ref]
            try:
                out[k] = ray.get(ref)
            except ray.exceptions.RayError as e:  # the actor died (or its node did)
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                out[k] = _WorkerLost(f"env actor {k} (pid {self._pids[k]}) died: {first}", e)
        for ref in late:
            k = k_of[ref]
            out[k] = _WorkerLost(f"env actor {k} (pid {self._pids[k]}) did not answer within "
                                 f"step_timeout={timeout} s")
            ray.kill(self._actors[k], no_restart=True)
        return out

    def restart(self, k: int) -> None:
        with contextlib.suppress(Exception):  # it may be gone already
            self._ray.kill(self._actors[k], no_restart=True)
        self._start(k)  # builds its envs in the background

    def pids(self) -> list[int | None]:
        """Actor process ids (None for one that failed to start)."""
        self._await_boot(list(self._booting), self._timeout)
        return list(self._pids)

    def actors(self) -> list[Any]:
        """The actor handles (for tests and debugging)."""
        return list(self._actors)

    def close(self) -> None:
        for actor in self._actors:
            with contextlib.suppress(Exception):
                self._ray.kill(actor, no_restart=True)
        self._actors = []
        if self._owns_ray:
            self._ray.shutdown()


# ---------------------------------------------------------------------------------------------


def _slice_sizes(n: int, parts: int) -> list[int]:
    """``n`` items in ``parts`` contiguous slices whose sizes differ by at most one."""
    base, extra = divmod(n, parts)
    return [base + (k < extra) for k in range(parts)]


class GroupVectorEnv:
    """N tasks x G copies of ``env_id``, reset per group and stepped as one batch.

    Env ``i`` belongs to group ``i // group_size``. Unlike Gymnasium's vector envs, episodes
    are never reset automatically: an env whose episode ended (or failed) stays out of the
    batch until the next :meth:`reset`, and infos are per-env lists, not stacked arrays.

    Args:
        env_id: a registered id (``"WebShop-v0"``) or ``"module:Id"``; every worker builds its
            envs with ``gym.make(env_id, **env_kwargs)``.
        n_tasks: number of groups N (tasks per reset).
        group_size: copies G of each task.
        backend: ``"inprocess"``, ``"process"`` or ``"ray"``.
        num_workers: worker processes or actors (default ``min(num_envs, os.cpu_count())``);
            each hosts a contiguous slice of envs. Ignored in-process.
        env_kwargs: keyword arguments of ``gym.make``.
        ray_address: a Ray cluster to join (``"auto"``, ``"ray://host:10001"``); None starts
            Ray on this machine unless it is already initialised. Ray is shut down at
            :meth:`close` only if this object started it.
        step_timeout: seconds a worker may take to answer a reset or step before it is
            killed and its live episodes failed (building a worker's envs gets
            ``max(step_timeout, 60)``). Not enforced in-process, where nothing can be killed.

    Attributes:
        live: ``bool[num_envs]``, whose episodes are running (all True after a reset).
        failed: ``bool[num_envs]``, whose episodes were lost to a dead worker or an env error.
        worker_envs: the envs each worker hosts, as ranges of env indices.
    """

    def __init__(
        self,
        env_id: str,
        n_tasks: int,
        group_size: int,
        *,
        backend: str = "inprocess",
        num_workers: int | None = None,
        env_kwargs: dict | None = None,
        ray_address: str | None = None,
        step_timeout: float = 120.0,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
        if n_tasks < 1 or group_size < 1:
            raise ValueError(f"n_tasks and group_size must be >= 1, got {n_tasks}, {group_size}")
        if step_timeout <= 0:
            raise ValueError(f"step_timeout must be positive, got {step_timeout}")
        module, _, name = env_id.rpartition(":")
        if module:  # "module:Id": importing the module registers the id (as in gym.make)
            importlib.import_module(module)
        gym.spec(name)  # an unknown id fails here, not in every worker
        self.env_id = env_id
        self.backend = backend
        self.n_tasks = n_tasks
        self.group_size = group_size
        self.num_envs = n_tasks * group_size
        self.step_timeout = float(step_timeout)
        self.live = np.zeros(self.num_envs, dtype=bool)
        self.failed = np.zeros(self.num_envs, dtype=bool)
        self._closed = True  # until the workers exist, close() has nothing to do
        self._has_reset = False

        if backend == "inprocess":
            num_workers = 1
        elif num_workers is None:
            num_workers = min(self.num_envs, os.cpu_count() or 1)
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        num_workers = min(num_workers, self.num_envs)
        sizes = _slice_sizes(self.num_envs, num_workers)
        starts = np.concatenate([[0], np.cumsum(sizes)]).tolist()
        self.worker_envs = [range(a, b) for a, b in zip(starts[:-1], starts[1:], strict=True)]
        self.num_workers = num_workers

        kwargs = dict(env_kwargs or {})
        self._workers: _Workers
        if backend == "inprocess":
            self._workers = _InProcessWorkers(env_id, kwargs, sizes)
        elif backend == "process":
            self._workers = _ProcessWorkers(env_id, kwargs, sizes, self.step_timeout)
        else:
            self._workers = _RayWorkers(env_id, kwargs, sizes, self.step_timeout, ray_address)
        self._closed = False

    # -- the API ------------------------------------------------------------------------------

    def reset(
        self, tasks: Sequence[int | str], seeds: Sequence[int] | None = None
    ) -> tuple[list[str], list[dict]]:
        """Start one episode per env: env ``i`` gets ``options={"task": tasks[i // G]}`` and
        ``seed=seeds[i // G]`` (default: the group's position, ``0..n_tasks-1``).

        Returns:
            per-env observations and infos. An env whose worker died during the reset (twice:
            a dead worker is replaced and the reset retried once) has ``None`` as observation,
            an info ``{"worker_failed": True, "error": ...}`` and is marked failed.

        Raises:
            ValueError: wrong number of tasks or seeds.
            Exception: whatever an env's own reset raised (e.g. an unknown task), re-raised
                here after every worker has answered; no env is live then.
        """
        self._check_open()
        tasks = list(tasks)
        if len(tasks) != self.n_tasks:
            raise ValueError(f"reset needs {self.n_tasks} tasks (one per group), got {len(tasks)}")
        seeds = list(range(self.n_tasks)) if seeds is None else [int(s) for s in seeds]
        if len(seeds) != self.n_tasks:
            raise ValueError(f"reset needs {self.n_tasks} seeds (one per group), got {len(seeds)}")
        G = self.group_size
        requests = {
            k: [(i - r.start, tasks[i // G], seeds[i // G]) for i in r]
            for k, r in enumerate(self.worker_envs)
        }
        self.live[:] = False
        self.failed[:] = False
        answers = self._call("reset", requests)
        lost = [k for k, a in answers.items() if isinstance(a, _WorkerLost)]
        if lost:  # a worker found dead at reset loses no episode yet: replace it and retry once
            for k in lost:
                self._workers.restart(k)
            answers.update(self._call("reset", {k: requests[k] for k in lost}))

        obs: list[Any] = [None] * self.num_envs
        infos: list[Any] = [None] * self.num_envs
        errors: list[tuple[int, _EnvError]] = []
        for k, answer in answers.items():
            envs = self.worker_envs[k]
            if isinstance(answer, _WorkerLost):
                self._workers.restart(k)
                for i in envs:
                    self.failed[i] = True
                    infos[i] = {"worker_failed": True, "error": answer.message}
                continue
            for i, result in zip(envs, answer, strict=True):
                if isinstance(result, _EnvError):
                    errors.append((i, result))
                else:
                    obs[i], infos[i] = result
                    self.live[i] = True
        self._has_reset = True
        if errors:
            self.live[:] = False
            i, err = min(errors, key=lambda e: e[0])
            note = f"env {i} (task {tasks[i // G]!r}) raised in reset:\n{err.message}"
            if err.exception is not None:
                raise err.exception from _RemoteTraceback(note)
            raise RuntimeError(note)
        return obs, infos

    def step(
        self, actions: Sequence[str | None]
    ) -> tuple[list[str | None], np.ndarray, np.ndarray, np.ndarray, list[dict | None]]:
        """Step every live env with its action; envs not live take ``None`` and are skipped.

        Returns:
            ``(observations, rewards, terminated, truncated, infos)``: per-env lists and
            ``float``/``bool`` arrays of length ``num_envs``, with ``None``, 0 and False for
            envs not stepped. An env whose episode ends here stops being live (no auto-reset).
            Envs lost to a dead or late worker come back truncated, with info
            ``{"worker_failed": True, "error": ...}``, and are marked failed; an env that
            raised gets ``{"env_error": True, "error": ...}`` and is marked failed too.

        Raises:
            ValueError: wrong number of actions, ``None`` for a live env, or an action for an
                env that is not live.
        """
        self._check_open()
        if not self._has_reset:
            raise ValueError("call reset() before step()")
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"step needs {self.num_envs} actions (None for envs not live), "
                             f"got {len(actions)}")
        is_none = np.array([a is None for a in actions], dtype=bool)
        if (missing := np.flatnonzero(self.live & is_none)).size:
            raise ValueError(f"envs {missing.tolist()} are live but got no action (None)")
        if (extra := np.flatnonzero(~self.live & ~is_none)).size:
            raise ValueError(f"envs {extra.tolist()} are not live (episode ended or failed) "
                             "but got an action; pass None for them")

        stepped = {k: [i for i in r if self.live[i]] for k, r in enumerate(self.worker_envs)}
        stepped = {k: ids for k, ids in stepped.items() if ids}
        requests = {k: [(i - self.worker_envs[k].start, actions[i]) for i in ids]
                    for k, ids in stepped.items()}
        answers = self._call("step", requests)

        obs: list[Any] = [None] * self.num_envs
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        infos: list[Any] = [None] * self.num_envs
        for k, answer in answers.items():
            if isinstance(answer, _WorkerLost):
                self._workers.restart(k)  # builds its envs now; serves from the next reset
                for i in stepped[k]:
                    self._fail(i, truncated, infos, worker_failed=True, error=answer.message)
                continue
            for i, result in zip(stepped[k], answer, strict=True):
                if isinstance(result, _EnvError):
                    warnings.warn(f"env {i} raised in step; its episode is marked failed:\n"
                                  f"{result.message}", RuntimeWarning, stacklevel=2)
                    self._fail(i, truncated, infos, env_error=True, error=result.message)
                    continue
                obs[i], rewards[i], terminated[i], truncated[i], infos[i] = result
                if terminated[i] or truncated[i]:
                    self.live[i] = False
        return obs, rewards, terminated, truncated, infos

    def worker_pids(self) -> list[int]:
        """Process id of each worker (this process's own id, repeated, in-process)."""
        self._check_open()
        return self._workers.pids()

    def close(self) -> None:
        """Stop the workers (and Ray, if this object started it). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.live[:] = False
        self._workers.close()

    def __enter__(self) -> GroupVectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Not contextlib.suppress: at interpreter shutdown this module's globals may be None.
        try:  # noqa: SIM105
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return (f"GroupVectorEnv({self.env_id!r}, n_tasks={self.n_tasks}, "
                f"group_size={self.group_size}, backend={self.backend!r}, "
                f"num_workers={self.num_workers})")

    # -- internals ----------------------------------------------------------------------------

    def _call(self, method: str, requests: dict[int, Any]) -> dict[int, Any]:
        """Send every request first (the workers run in parallel), then gather the answers."""
        if not requests:
            return {}
        for k, payload in requests.items():
            self._workers.submit(k, method, payload)
        return self._workers.collect(list(requests), self.step_timeout)

    def _fail(self, i: int, truncated: np.ndarray, infos: list, **info: Any) -> None:
        self.live[i] = False
        self.failed[i] = True
        truncated[i] = True  # the episode was cut short, not finished by the env
        infos[i] = {"worker_failed": False, **info}

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this GroupVectorEnv is closed")


class _RemoteTraceback(Exception):
    """Carries a worker's traceback as the cause of an exception re-raised here."""

    def __str__(self) -> str:
        return self.args[0]

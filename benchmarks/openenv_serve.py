"""``gagpo serve env`` under load and abuse: sessions, latency, throughput, memory, errors.

For each environment, starts ``gagpo serve env`` in a subprocess on a free loopback port, then:

1. **load**: ``--sessions`` concurrent WebSocket sessions (one asyncio client process), each
   playing ``--steps`` steps (random admissible actions, a new episode whenever one ends):
   errors, p50/p99 step latency (send to answer), steps/s;
2. **memory**: the server's RSS after a warm-up round of sessions, after the load (all
   sessions closed), whether ``--sessions`` new sessions fit again (nothing leaked), and after
   the same load once more (a leak grows with every session; the allocator's high-water mark
   is reused, so memory that stays flat across the second load is not held by sessions);
3. **vanished clients**: ``--sessions`` clients start an episode and drop their TCP
   connection (no close frame) or just go quiet; after the idle timeout the server must have
   room for ``--sessions`` new sessions again;
4. **hostile**: malformed JSON, non-object JSON, binary frames, wrong types, huge actions,
   unknown types and sessions, a step after close, a flood of sessions over the limit: each
   must get an error (or a close for oversize frames), the server must stay up and leak none.

Exit status 1 when any check fails, so the run doubles as a check.

    python -m benchmarks.openenv_serve [--sessions 64] [--steps 2000] [--env WebShop-v0]
        [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from benchmarks.record import command_line, recorded

ENVS = ("WebShop-v0", "ALFWorld-v0")
IDLE_TIMEOUT = 5.0


class Server:
    def __init__(self, env_id: str, sessions: int, idle_timeout: float) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws = f"ws://127.0.0.1:{self.port}/ws"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gagpo.cli", "serve", "env", "--env", env_id, "--port",
             str(self.port), "--max-sessions", str(sessions), "--idle-timeout",
             str(idle_timeout), "--max-action-chars", "4096"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not self.healthy():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {self.proc.stderr.read()}")
            time.sleep(0.1)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                return json.load(r)["status"] == "healthy"
        except OSError:
            return False

    def rss_mb(self) -> float:
        return psutil.Process(self.proc.pid).memory_info().rss / 2**20

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


async def _ask(ws: Any, message: Any) -> dict:
    await ws.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
    return json.loads(await ws.recv())


async def _session(url: str, k: int, steps: int, latencies: list[float],
                   errors: list[str], n_tasks: int) -> int:
    from websockets.asyncio.client import connect

    rng = random.Random(k)
    episodes = 0
    async with connect(url, max_size=1 << 24) as ws:
        answer = await _ask(ws, {"type": "reset", "data": {"index": k % n_tasks, "seed": k}})
        if answer["type"] != "observation":
            errors.append(str(answer)[:200])
            return 0
        obs = answer["data"]["observation"]
        for _ in range(steps):
            actions = obs["admissible_actions"] or ["look"]
            action = rng.choice(actions)
            if action == "search[<query>]":
                action = f"search[{obs['instruction'][:60]}]"
            start = time.perf_counter()
            answer = await _ask(ws, {"type": "step", "data": {"command": action}})
            latencies.append(time.perf_counter() - start)
            if answer["type"] != "observation":
                errors.append(str(answer)[:200])
                return episodes
            obs = answer["data"]["observation"]
            if answer["data"].get("done"):
                episodes += 1
                answer = await _ask(ws, {"type": "reset", "data": {"index": rng.randrange(
                    n_tasks), "seed": rng.randrange(2**31)}})
                obs = answer["data"]["observation"]
        await ws.send(json.dumps({"type": "close"}))
    return episodes


async def load(server: Server, sessions: int, steps: int, n_tasks: int) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    start = time.perf_counter()
    episodes = await asyncio.gather(*[
        _session(server.ws, k, steps, latencies, errors, n_tasks) for k in range(sessions)],
        return_exceptions=True)
    seconds = time.perf_counter() - start
    errors += [repr(e)[:200] for e in episodes if isinstance(e, BaseException)]
    lat = np.array(latencies) * 1000 if latencies else np.zeros(1)
    return {"sessions": sessions, "steps": len(latencies), "seconds": round(seconds, 1),
            "steps_per_s": round(len(latencies) / seconds, 1),
            "episodes": sum(e for e in episodes if isinstance(e, int)),
            "p50_ms": round(float(np.percentile(lat, 50)), 2),
            "p99_ms": round(float(np.percentile(lat, 99)), 2), "errors": len(errors),
            "first_errors": errors[:3]}


async def room_for(server: Server, sessions: int) -> bool:
    """Whether ``sessions`` new sessions open and reset (nothing leaked from before)."""
    from websockets.asyncio.client import connect

    conns = []
    try:
        for _ in range(sessions):
            ws = await connect(server.ws)
            conns.append(ws)
            if (await _ask(ws, {"type": "reset", "data": {"index": 0}}))["type"] \
                    != "observation":
                return False
        return True
    finally:
        for ws in conns:
            await ws.close()


async def vanished(server: Server, sessions: int, idle_timeout: float) -> dict:
    from websockets.asyncio.client import connect

    quiet = []
    for k in range(sessions):
        ws = await connect(server.ws)
        await _ask(ws, {"type": "reset", "data": {"index": k % 4}})
        await _ask(ws, {"type": "step", "data": {"command": "look"}})
        if k % 2:
            ws.transport.abort()  # the TCP connection cut, no close frame
        else:
            quiet.append(ws)  # still connected, silent
    await asyncio.sleep(idle_timeout + 2)
    ok = await room_for(server, sessions)
    for ws in quiet:
        ws.transport.abort()
    return {"clients": sessions, "room_after_timeout": ok}


HOSTILE: list[tuple[str, Any]] = [
    ("malformed JSON", "{not json"),
    ("JSON array", "[1, 2]"),
    ("JSON string", '"step"'),
    ("binary frame", b"\x00\xff\x00"),
    ("unknown type", {"type": "teleport"}),
    ("command of wrong type", {"type": "step", "data": {"command": 7}}),
    ("data of wrong type", {"type": "step", "data": "look"}),
    ("missing command", {"type": "step", "data": {}}),
    ("huge action (100k chars)", {"type": "step", "data": {"command": "x" * 100_000}}),
    ("unknown reset option", {"type": "reset", "data": {"taks": 0}}),
    ("task out of range", {"type": "reset", "data": {"task": 10**12}}),
    ("negative seed", {"type": "reset", "data": {"seed": -5}}),
]


async def hostile(server: Server, sessions: int, rounds: int) -> dict:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    answered, failures = 0, []
    async with connect(server.ws) as ws:
        await _ask(ws, {"type": "reset", "data": {"index": 0}})
        for _ in range(rounds):
            for name, message in HOSTILE:
                answer = await _ask(ws, message)
                if answer.get("type") == "error" and answer["data"].get("message"):
                    answered += 1
                else:
                    failures.append(name)
        if (await _ask(ws, {"type": "reset", "data": {"index": 0}}))["type"] != "observation":
            failures.append("session unusable after the hostile messages")
    # oversize frame (over the server's 1 MiB frame limit): closed with 1009
    async with connect(server.ws, max_size=None) as ws:
        await ws.send(json.dumps({"type": "step", "data": {"command": "y" * (2 << 20)}}))
        try:
            await ws.recv()
            failures.append("oversize frame answered")
        except ConnectionClosed as e:
            if not (e.rcvd and e.rcvd.code == 1009):
                failures.append(f"oversize frame closed with {e.rcvd}")
    # unknown session
    async with connect(server.ws + "?session_id=nope") as ws:
        if "Unknown session_id" not in json.loads(await ws.recv())["data"]["message"]:
            failures.append("unknown session")
    # a step after close
    async with connect(server.ws) as ws:
        await _ask(ws, {"type": "reset", "data": {"index": 0}})
        await ws.send(json.dumps({"type": "close"}))
        try:
            await _ask(ws, {"type": "step", "data": {"command": "look"}})
            failures.append("step after close answered")
        except ConnectionClosed:
            pass
    # a flood over the limit
    held = [await connect(server.ws) for _ in range(sessions)]
    for ws in held:
        await _ask(ws, {"type": "reset", "data": {"index": 0}})
    refused = 0
    for _ in range(2 * sessions):
        async with connect(server.ws) as ws:
            answer = json.loads(await ws.recv())
            refused += answer["data"].get("code") == "CAPACITY_REACHED"
    for ws in held:
        await ws.close()
    flood_ok = refused == 2 * sessions
    if not flood_ok:
        failures.append(f"flood: {refused}/{2 * sessions} refused")
    await asyncio.sleep(0.5)
    room = await room_for(server, sessions)
    if not room:
        failures.append("sessions leaked by the hostile round")
    return {"messages": rounds * len(HOSTILE), "answered_with_errors": answered,
            "flood_refused": refused, "flood": 2 * sessions, "failures": failures,
            "alive": server.healthy()}


def run_env(env_id: str, sessions: int, steps: int) -> dict:
    import gagpo.envs

    n_tasks = min(64, len(gagpo.envs.split_tasks(env_id)))
    server = Server(env_id, sessions, IDLE_TIMEOUT)
    try:
        asyncio.run(load(server, sessions, 20, n_tasks))  # warm-up: catalogs, caches, threads
        rss_warm = server.rss_mb()
        res = {"env": env_id, "rss_warm_mb": round(rss_warm, 1),
               "load": asyncio.run(load(server, sessions, steps, n_tasks))}
        time.sleep(0.5)
        res["rss_after_load_mb"] = round(server.rss_mb(), 1)
        res["room_after_load"] = asyncio.run(room_for(server, sessions))
        # The same load again: a leak grows with every session; the allocator's high-water
        # mark does not (it is reused).
        res["load_again"] = asyncio.run(load(server, sessions, steps, n_tasks))
        time.sleep(0.5)
        res["rss_after_second_load_mb"] = round(server.rss_mb(), 1)
        res["vanished"] = asyncio.run(vanished(server, sessions, IDLE_TIMEOUT))
        res["hostile"] = asyncio.run(hostile(server, sessions, rounds=3))
        res["rss_end_mb"] = round(server.rss_mb(), 1)
        res["alive"] = server.proc.poll() is None and server.healthy()
    finally:
        server.close()
    return res


def report(r: dict) -> str:
    ld, v, h = r["load"], r["vanished"], r["hostile"]
    return "\n".join([
        f"{r['env']}: {ld['sessions']} sessions x {ld['steps'] // max(ld['sessions'], 1)} "
        f"steps: {ld['steps']} steps in {ld['seconds']} s = {ld['steps_per_s']} steps/s, "
        f"p50 {ld['p50_ms']} ms, p99 {ld['p99_ms']} ms, {ld['episodes']} episodes ended, "
        f"errors {ld['errors']}",
        f"  memory (RSS): {r['rss_warm_mb']} MB after warm-up, {r['rss_after_load_mb']} MB "
        f"after the load (sessions closed), {r['rss_after_second_load_mb']} MB after the same "
        f"load again ({r['load_again']['errors']} errors), {r['rss_end_mb']} MB at the end; "
        f"{ld['sessions']} new sessions fit after the load: {r['room_after_load']}",
        f"  vanished: {v['clients']} clients dropped mid-episode (half cut, half silent); "
        f"room for {v['clients']} new sessions "
        f"after the {IDLE_TIMEOUT:g} s idle timeout: {v['room_after_timeout']}",
        f"  hostile: {h['answered_with_errors']}/{h['messages']} hostile messages answered "
        f"with errors, session usable after; oversize frame closed (1009); unknown session, "
        f"step after close refused; flood: {h['flood_refused']}/{h['flood']} over the limit "
        f"refused (CAPACITY_REACHED); failures {h['failures'] or 0}; server alive: "
        f"{r['alive']}",
    ])


def failed(r: dict) -> bool:
    return bool(r["load"]["errors"] or r["load_again"]["errors"] or not r["room_after_load"]
                or not r["vanished"]["room_after_timeout"] or r["hostile"]["failures"]
                or not r["alive"])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=64, help="concurrent sessions (and limit)")
    p.add_argument("--steps", type=int, default=2000, help="steps per session")
    p.add_argument("--env", action="append", choices=ENVS, default=None,
                   help="environments (repeatable; default both)")
    p.add_argument("--out", type=Path, default=None, help="write results.json and report.txt")
    args = p.parse_args(argv)
    results = []
    with recorded(args.out, command_line("benchmarks.openenv_serve", argv)):
        print(f"gagpo serve env (OpenEnv) under load and abuse; idle timeout {IDLE_TIMEOUT:g} s",
              flush=True)
        for env_id in args.env or ENVS:
            results.append(run_env(env_id, args.sessions, args.steps))
            print(report(results[-1]), flush=True)
    if args.out:
        (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return 1 if any(failed(r) for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())

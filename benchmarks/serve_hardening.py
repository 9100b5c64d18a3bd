"""The served shop under hostile input and load: statuses, latency and memory, in one run.

Starts ``gagpo serve webshop`` (waitress, the embedded catalog) in a subprocess on a free
loopback port, then:

1. **hostile round**: every request of :func:`hostile_requests` (malformed, oversized,
   forged, tampered, replayed, injection-shaped; pages and JSON API) sent ``--hostile-rounds``
   times; a response with status 5xx, a body that is not valid JSON on the API (NaN, Infinity
   included), or a traceback in the body is a failure.
2. **idle connections**: ``--idle`` sockets that send half a request and wait, while a normal
   client times its requests; then the sockets close.
3. **cache flood**: ``--flood`` requests that each bring something new for the caches to keep
   (searches of unique long words, purchases with unique long option values); the server's
   memory is read at each quarter and must level off.
4. **load**: ``--clients`` threads play episodes through the JSON API (open, search, click a
   result, buy) and read pages, for ``--seconds``; requests/s, p50/p99 latency, statuses.

The server's resident memory (RSS) is read at start (after a warm-up) and at the end. Exit
status 1 when any failure was seen, so the run doubles as a check.

    python -m benchmarks.serve_hardening [--seconds 60] [--clients 8] [--idle 150]
        [--flood 12000] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import requests
from itsdangerous import URLSafeSerializer

from benchmarks.record import machine
from gagpo.servers.webshop.web.tokens import SALT

RESULTS = Path(__file__).parent / "results" / "serve_hardening"
API = "/api/v1"
_NAVIGATION = {"click[back to search]", "click[next >]", "click[< prev]"}


@dataclass
class Probe:
    """One hostile request: what it is, and how to send it."""

    name: str
    method: str
    path: str
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    must_refuse: bool = False
    """A 2xx answer is a failure (a forged or hostile state was accepted)."""


def _json(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _forge(payload: Any, key: str) -> str:
    """A token signed the way the shop signs its tokens, with ``key``."""
    return URLSafeSerializer(key, salt=SALT).dumps(payload)


def hostile_requests(token: str, secret: str, asin: str) -> list[Probe]:
    """Requests an attacker or a broken client sends. ``token`` is a genuine session token
    (replayed and tampered with); ``secret`` is the server's (as if it leaked), so that
    well-signed but hostile states reach the server's checks; ``asin`` a real product."""
    api = f"{API}/sessions"
    step = f"{api}/step"
    big = "a " * 200_000
    done = [1, 0, 4, [], 1, asin, [], "", [], 1.0]  # a finished session, score 1.0
    forged_public = _forge(done, "gagpo-webshop")
    probes = [
        # -- JSON API bodies
        Probe("api: empty body", "POST", step, b""),
        Probe("api: not JSON", "POST", step, b"{not json"),
        Probe("api: JSON list", "POST", step, b"[1, 2]"),
        Probe("api: deep nesting", "POST", step, b"[" * 100_000 + b"]" * 100_000),
        Probe("api: body over 256 kB", "POST", step, _json({"session": token, "action": big})),
        Probe("api: NaN goal", "POST", api, b'{"goal": NaN}'),
        Probe("api: huge goal", "POST", api, _json({"goal": 10**400})),
        Probe("api: negative goal", "POST", api, _json({"goal": -1})),
        Probe("api: bool goal", "POST", api, _json({"goal": True})),
        Probe("api: unknown mode", "POST", api, _json({"goal": 0, "observation_mode": "x"})),
        Probe("api: bad request_infos", "POST", api, _json({"goal": 0, "request_infos": "x"})),
        Probe("api: action not a string", "POST", step, _json({"session": token, "action": 5})),
        Probe("api: lone surrogate action", "POST", step,
              b'{"session": "' + token.encode() + b'", "action": "search[\\ud800]"}'),
        Probe("api: NUL search", "POST", step, _json({"session": token, "action": "search[\0]"})),
        Probe("api: control-character search", "POST", step,
              _json({"session": token, "action": "search[\x1b\x07]"})),
        Probe("api: unicode search", "POST", step,
              _json({"session": token, "action": "search[\u202e\U0001f600 \u0301]"})),
        Probe("api: wrong method", "GET", step),
        Probe("api: wrong content type", "POST", step, _json({"session": token, "action": "x"}),
              {"Content-Type": "text/plain"}),
        # -- tokens: replayed, tampered, forged, and well-signed but hostile
        Probe("token: replayed", "POST", step, _json({"session": token, "action": "search[x]"})),
        Probe("token: tampered", "POST", step,
              _json({"session": token[:-3] + ("AAA" if token[-3:] != "AAA" else "BBB"),
                     "action": "search[x]"}), must_refuse=True),
        Probe("token: forged with a guessed key", "POST", f"{api}/observe",
              _json({"session": forged_public}), must_refuse=True),
        Probe("token: over 64 kB", "POST", step, _json({"session": "x" * 70_000, "action": "x"})),
        Probe("token: not a string", "POST", step, _json({"session": [1], "action": "x"})),
    ]
    signed = {
        "reward 1e9": done[:-1] + [1e9],
        "reward NaN": done[:-1] + [float("nan")],
        "reward on the results page": [1, 0, 1, ["shoe"], 1, "", [], "", [], 1.0],
        "20,000 keywords": [1, 0, 1, [f"word{i}" for i in range(20_000)], 1, "", [], "", [],
                            None],
        "page number 0": [1, 0, 1, ["shoe"], 0, "", [], "", [], None],
        "goal out of range": [1, 10**9, 0, [], 1, "", [], "", [], None],
        "unknown page code": [1, 0, 9, [], 1, "", [], "", [], None],
        "payload not a list": {"goal": 0},
    }
    for what, payload in signed.items():
        probes.append(Probe(f"token: signed, {what}", "POST", f"{api}/observe",
                            _json({"session": _forge(payload, secret)}), must_refuse=True))
    # -- HTML pages
    probes += [
        Probe("page: unknown session id chars", "GET", "/..%2f..%2fetc%2fpasswd"),
        Probe("page: goal out of range", "GET", "/fixed_999999999"),
        Probe("page: huge search query", "GET", "/fixed_0?search_query=" + "a" * 100_000),
        Probe("page: empty search", "GET", "/fixed_0?search_query=%20"),
        Probe("page: literal bomb keywords", "GET", "/search_results/fixed_0/" + "[" * 5000 + "/1"),
        Probe("page: code in keywords", "GET",
              "/search_results/fixed_0/__import__('os').system('true')/1"),
        Probe("page: lone surrogate keywords", "GET",
              "/search_results/fixed_0/%5B'%5Cud800'%5D/1"),
        Probe("page: huge page number", "GET", "/search_results/fixed_0/shoe/99999999999"),
        Probe("page: negative page number", "GET", "/search_results/fixed_0/shoe/-1"),
        Probe("page: unknown asin", "GET", "/item_page/fixed_0/XXXXXXXXXX/shoe/1/%7B%7D"),
        Probe("page: bad options literal", "GET", "/done/fixed_0/XXXXXXXXXX/%7B1:%20"),
        Probe("page: script in session id", "GET", "/%3Cscript%3Ealert(1)%3C/script%3E"),
        Probe("page: 10 kB URL", "GET", "/search_results/fixed_0/" + "b" * 10_000 + "/1"),
    ]
    return probes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``gagpo serve webshop`` in a subprocess."""

    def __init__(self, secret: str, extra: Sequence[str] = ()) -> None:
        self.secret = secret
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "GAGPO_WEBSHOP_SECRET": secret}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gagpo.cli", "serve", "webshop", "--port", str(self.port),
             *extra],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 600  # the first start may build the catalog
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited: {self.proc.stderr.read()[-2000:]}")
            try:
                requests.get(self.url + f"{API}/info", timeout=2).raise_for_status()
                return
            except requests.RequestException:
                time.sleep(0.5)
        self.close()
        raise RuntimeError("the server did not answer within 10 minutes")

    def rss_mb(self) -> float:
        return psutil.Process(self.proc.pid).memory_info().rss / 2**20

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _is_clean(resp: requests.Response, api: bool, must_refuse: bool = False) -> str | None:
    """Why ``resp`` is a failure, or None."""
    if must_refuse and resp.status_code < 400:
        return f"accepted (status {resp.status_code})"
    if resp.status_code >= 500:
        return f"status {resp.status_code}"
    if "Traceback" in resp.text:
        return "traceback in the body"
    if api:
        try:
            json.loads(resp.text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError as e:
            return f"invalid JSON ({e})"
    return None


def some_product(server: Server) -> tuple[str, str]:
    """A genuine session token, and the ASIN of a product the shop sells."""
    http = requests.Session()
    opened = http.post(server.url + f"{API}/sessions", json={"goal": 0}).json()
    query = opened["info"]["instruction"]
    found = http.post(server.url + f"{API}/sessions/step",
                      json={"session": opened["session"], "action": f"search[{query}]"}).json()
    asin = next(a[len("click["):-1].upper() for a in found["info"]["admissible_actions"]
                if a not in _NAVIGATION)
    return opened["session"], asin


def hostile_round(server: Server, rounds: int) -> dict:
    http = requests.Session()
    token, asin = some_product(server)
    probes = hostile_requests(token, server.secret, asin)
    statuses: Counter[int] = Counter()
    by_probe: dict[str, int] = {}
    failures: list[str] = []
    latencies: list[float] = []
    for _ in range(rounds):
        for p in probes:
            t = time.perf_counter()
            try:
                resp = http.request(p.method, server.url + p.path, data=p.body,
                                    headers=p.headers or None, timeout=30)
            except requests.RequestException as e:
                failures.append(f"{p.name}: {type(e).__name__}")
                continue
            latencies.append(time.perf_counter() - t)
            statuses[resp.status_code] += 1
            by_probe[p.name] = resp.status_code
            why = _is_clean(resp, p.path.startswith(API), p.must_refuse)
            if why:
                failures.append(f"{p.name}: {why}")
    lat = np.array(latencies) * 1e3
    return {
        "requests": sum(statuses.values()),
        "statuses": dict(sorted(statuses.items())),
        "by_probe": by_probe,
        "failures": failures,
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
    }


def idle_connections(server: Server, n_idle: int, probes: int = 20) -> dict:
    """Half-open requests hold connections; a normal client's requests must still pass."""
    socks = []
    for _ in range(n_idle):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        s.sendall(b"GET /api/v1/info HTTP/1.1\r\nHost: x\r\n")  # never finished
        socks.append(s)
    time.sleep(0.5)
    latencies, errors = [], 0
    try:
        for _ in range(probes):
            t = time.perf_counter()
            try:
                requests.get(server.url + f"{API}/info", timeout=30).raise_for_status()
                latencies.append(time.perf_counter() - t)
            except requests.RequestException:
                errors += 1
    finally:
        for s in socks:
            s.close()
    lat = np.array(latencies or [float("nan")]) * 1e3
    return {"idle_sockets": n_idle, "requests": probes, "errors": errors,
            "p50_ms": float(np.percentile(lat, 50)), "max_ms": float(np.max(lat))}


def cache_flood(server: Server, n: int, asin: str) -> dict:
    """Requests that each fill the shop's caches with something new: searches of unique long
    words (search, stemmer and page caches) and purchases with unique long option values
    (reward memos). Every cache is bounded in bytes, so memory must level off."""
    http = requests.Session()
    rss, statuses = [server.rss_mb()], Counter()
    for i in range(n):
        word = f"{i:08d}" + secrets.token_hex(240)  # 488 characters, never seen before
        if i % 2:  # two unique words: the longest query the shop takes
            path = f"/search_results/fixed_0/{word}%20{word[::-1]}/1"
        else:
            path = f"/done/fixed_0/{asin}/{{'color': '{word}'}}"
        statuses[http.get(server.url + path, timeout=30).status_code] += 1
        if (i + 1) % max(1, n // 4) == 0:
            rss.append(server.rss_mb())
    return {"requests": n, "statuses": dict(sorted(statuses.items())), "rss_mb": rss}


def load(server: Server, clients: int, seconds: float) -> dict:
    """``clients`` threads, each playing API episodes and reading pages until time is up."""
    stop = time.monotonic() + seconds
    lock = threading.Lock()
    statuses: Counter[int] = Counter()
    latencies: list[float] = []
    failures: list[str] = []

    def client(k: int) -> None:
        http = requests.Session()
        mine: list[float] = []
        seen: Counter[int] = Counter()
        goal = k

        def call(method: str, path: str, **kw: Any) -> requests.Response:
            t = time.perf_counter()
            r = http.request(method, server.url + path, timeout=30, **kw)
            mine.append(time.perf_counter() - t)
            seen[r.status_code] += 1
            why = _is_clean(r, path.startswith(API))
            if why:
                with lock:
                    failures.append(f"{method} {path[:60]}: {why}")
            return r

        while time.monotonic() < stop:
            goal = (goal + clients) % 500
            out = call("POST", f"{API}/sessions", json={"goal": goal}).json()
            words = out["info"]["instruction"].lower().split()[:6]
            out = call("POST", f"{API}/sessions/step",
                       json={"session": out["session"], "action": f"search[{' '.join(words)}]"}
                       ).json()
            clicks = [a for a in out["info"]["admissible_actions"]
                      if a.startswith("click[") and a not in _NAVIGATION]
            if clicks:
                out = call("POST", f"{API}/sessions/step",
                           json={"session": out["session"], "action": clicks[0]}).json()
                call("POST", f"{API}/sessions/step",
                     json={"session": out["session"], "action": "click[buy now]"})
            call("GET", f"/fixed_{goal}")
            call("GET", f"/search_results/fixed_{goal}/{'%20'.join(words)}/1")
        with lock:
            latencies.extend(mine)
            statuses.update(seen)

    t = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - t
    lat = np.array(latencies) * 1e3
    return {
        "clients": clients,
        "seconds": elapsed,
        "requests": len(latencies),
        "requests_per_s": len(latencies) / elapsed,
        "statuses": dict(sorted(statuses.items())),
        "failures": failures[:20],
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
    }


def report(res: dict) -> str:
    h, i, ld, fl = res["hostile"], res["idle"], res["load"], res["flood"]
    lines = [
        f"Served shop under hostile input and load ({res['machine']})",
        f"  hostile: {h['requests']} requests ({len(h['by_probe'])} kinds x "
        f"{res['hostile_rounds']}), statuses {h['statuses']}, p50 {h['p50_ms']:.1f} ms, "
        f"p99 {h['p99_ms']:.1f} ms, failures {len(h['failures'])}",
        f"  idle: {i['idle_sockets']} half-open connections held; {i['requests']} normal "
        f"requests meanwhile: {i['errors']} errors, p50 {i['p50_ms']:.1f} ms, "
        f"max {i['max_ms']:.1f} ms",
        f"  load: {ld['clients']} clients x {ld['seconds']:.0f} s: {ld['requests']} requests, "
        f"{ld['requests_per_s']:.0f} requests/s, statuses {ld['statuses']}, "
        f"p50 {ld['p50_ms']:.1f} ms, p99 {ld['p99_ms']:.1f} ms, failures {len(ld['failures'])}",
        f"  cache flood: {fl['requests']} requests with unique 488-character words / option "
        f"values, "
        f"statuses {fl['statuses']}, RSS at each quarter "
        + " -> ".join(f"{m:.0f}" for m in fl["rss_mb"]) + " MB",
        f"  server memory (RSS): {res['rss_start_mb']:.0f} MB after warm-up, "
        f"{res['rss_end_mb']:.0f} MB at the end",
    ]
    for f in h["failures"] + ld["failures"]:
        lines.append(f"  FAILURE {f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0, help="length of the load phase")
    p.add_argument("--clients", type=int, default=8, help="client threads in the load phase")
    p.add_argument("--idle", type=int, default=150, help="half-open connections to hold")
    p.add_argument("--hostile-rounds", type=int, default=5, help="times each probe is sent")
    p.add_argument("--flood", type=int, default=40_000,
                   help="requests that each put something new in the caches")
    p.add_argument("--out", type=Path, default=None, help="write results.json and report.txt")
    args = p.parse_args(argv)

    server = Server(secrets.token_hex(32))
    try:
        warm = requests.Session()
        for g in range(20):  # warm the search index and page caches
            warm.get(server.url + f"/fixed_{g}")
            warm.post(server.url + f"{API}/sessions", json={"goal": g})
        rss_start = server.rss_mb()
        res = {
            "command": "python -m benchmarks.serve_hardening " + " ".join(argv or sys.argv[1:]),
            "machine": machine(),
            "hostile_rounds": args.hostile_rounds,
            "hostile": hostile_round(server, args.hostile_rounds),
            "idle": idle_connections(server, args.idle),
            "load": load(server, args.clients, args.seconds),
            "flood": cache_flood(server, args.flood, some_product(server)[1]),
            "rss_start_mb": rss_start,
            "rss_end_mb": server.rss_mb(),
        }
        alive = server.proc.poll() is None
    finally:
        server.close()
    text = report(res)
    print(text, flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(res, indent=1) + "\n")
        (args.out / "report.txt").write_text(f"$ {res['command']}\n{text}\n")
    failed = (res["hostile"]["failures"] or res["load"]["failures"] or res["idle"]["errors"]
              or any(code >= 500 for code in res["flood"]["statuses"]))
    return 1 if failed or not alive else 0


if __name__ == "__main__":
    raise SystemExit(main())

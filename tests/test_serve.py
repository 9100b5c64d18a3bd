"""``gagpo serve webshop``: the secret a public address needs, the connection settings that keep
the shop answering while idle half-open connections pile up, and ``--no-expert-infos``.

The servers here are real ``python -m gagpo.servers.webshop.web.serve`` processes on free loopback
ports.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence

import pytest
import requests

from gagpo.servers.webshop.web.serve import (
    DEFAULT_CHANNEL_TIMEOUT,
    DEFAULT_CONNECTION_LIMIT,
    ServeError,
    check_secret,
    is_loopback,
    main,
    url_host,
)
from gagpo.servers.webshop.web.tokens import SECRET_ENV, SECRET_FILE

PARTIAL_REQUEST = b"GET /api/v1/info HTTP/1.1\r\nHost: attacker\r\n"  # no blank line: unfinished


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(args: Sequence[str] = ()) -> Iterator[str]:
    """``python -m gagpo.servers.webshop.web.serve`` with ``args`` on a free port; yields its base
    URL."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    cmd = [sys.executable, "-m", "gagpo.servers.webshop.web.serve", "--port", str(port),
           "--num-products", "200", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(f"{base}/api/v1/info", timeout=5)
                break
            except requests.ConnectionError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "server never came up"
                time.sleep(0.05)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()


def _idle_sockets(port: int, n: int) -> list[socket.socket]:
    """``n`` connections that each send the start of a request and then wait."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(PARTIAL_REQUEST)
        socks.append(s)
    return socks


def _timed_get(url: str, timeout: float) -> tuple[int, float]:
    t0 = time.monotonic()
    r = requests.get(url, timeout=timeout)
    return r.status_code, time.monotonic() - t0


# ------------------------------------------------------------------------------ the secret


@pytest.mark.parametrize("host,loopback", [
    ("127.0.0.1", True), ("127.8.9.1", True), ("localhost", True), ("::1", True),
    ("[::1]", True), ("0.0.0.0", False), ("::", False), ("", False), ("192.168.1.5", False),
    ("example.org", False), ("localhost.example.org", False),
])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_printed_urls_bracket_ipv6_once():
    assert [url_host(h) for h in ("::1", "[::1]", "::", "127.0.0.1", "localhost")] == [
        "[::1]", "[::1]", "[::]", "127.0.0.1", "localhost"]


def test_public_address_needs_an_explicit_secret(capsys, monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    for host in ("0.0.0.0", "::", "192.168.1.5"):
        assert main(["--host", host, "--port", "0"]) == 2
        err = capsys.readouterr().err
        assert f"refusing to serve on {host}" in err and SECRET_ENV in err
    assert main(["--host", "0.0.0.0", "--secret", "too-short"]) == 2
    assert "at least 16 characters" in capsys.readouterr().err
    monkeypatch.setenv(SECRET_ENV, "short")
    assert main(["--host", "127.0.0.1", "--port", "70000"]) == 2  # argument checks first
    assert main(["--host", "0.0.0.0"]) == 2
    assert "at least 16 characters" in capsys.readouterr().err
    # With a secret it is allowed, and warned about.
    warning = check_secret("0.0.0.0", "x" * 32)
    assert warning and "reachable from other machines" in warning
    assert check_secret("127.0.0.1", None) is None
    with pytest.raises(ServeError):
        check_secret("0.0.0.0", None)


def test_a_taken_port_or_a_refused_key_file_is_a_message_not_a_traceback(capsys, monkeypatch,
                                                                        tmp_path):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["--port", str(port), "--num-products", "200"]) == 2
    assert "gagpo serve webshop:" in capsys.readouterr().err
    monkeypatch.setenv("GAGPO_CACHE", str(tmp_path))
    (tmp_path / SECRET_FILE).write_text("k" * 64)
    (tmp_path / SECRET_FILE).chmod(0o644)  # others may read it: refused
    assert main(["--port", "0", "--num-products", "200"]) == 2
    assert "chmod 600" in capsys.readouterr().err


def test_serve_rejects_bad_connection_settings():
    assert main(["--connection-limit", "0"]) == 2
    assert main(["--channel-timeout", "0"]) == 2
    assert main(["--threads", "0"]) == 2


# ----------------------------------------------------------------------- idle connections


def test_idle_half_open_connections_do_not_lock_out_clients():
    """150 connections that send half a request and wait: with waitress's own defaults
    (100 connections, 120 s timeout) every other client waited; with ours a normal request
    is answered at once."""
    assert DEFAULT_CONNECTION_LIMIT >= 500 and DEFAULT_CHANNEL_TIMEOUT <= 60
    with served() as base:
        port = int(base.rsplit(":", 1)[1])
        socks = _idle_sockets(port, 150)
        try:
            time.sleep(0.5)  # let the server accept them all
            for _ in range(5):
                code, seconds = _timed_get(f"{base}/api/v1/info", timeout=5)
                assert code == 200 and seconds < 2.0, seconds
            page = requests.get(f"{base}/fixed_0", timeout=5)
            assert page.status_code == 200
        finally:
            for s in socks:
                s.close()


def test_channel_timeout_frees_a_full_connection_table():
    """More idle connections than --connection-limit: a client waits at most about
    --channel-timeout (plus the cleanup interval), then the idle ones are closed."""
    with served(["--connection-limit", "20", "--channel-timeout", "2"]) as base:
        port = int(base.rsplit(":", 1)[1])
        socks = _idle_sockets(port, 30)
        try:
            code, seconds = _timed_get(f"{base}/api/v1/info", timeout=15)
            assert code == 200 and seconds < 8.0, seconds
            # The server closed the idle ones it had accepted: they read end-of-file.
            closed = 0
            for s in socks[:20]:
                s.settimeout(5)
                with contextlib.suppress(OSError):
                    closed += s.recv(100) == b""
            assert closed >= 15, closed
        finally:
            for s in socks:
                s.close()


def test_a_body_over_the_limit_is_refused_before_it_is_read():
    """A body far over the app's 256 kB bound is a 413 as soon as its size shows (the
    announced length, or the chunks sent so far), not after waitress has spooled up to 1 GB
    of it; one a little over it gets the API's JSON 413."""
    with served(["--threads", "2"]) as base:
        r = requests.post(f"{base}/api/v1/sessions", data=b" " * 300_000, timeout=10,
                          headers={"Content-Type": "application/json"})
        assert r.status_code == 413 and "error" in r.json()
        port = int(base.rsplit(":", 1)[1])
        head = b"POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(head + b"Content-Length: 100000000\r\n\r\n{")
            assert s.recv(100).startswith(b"HTTP/1.1 413")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n")
            with contextlib.suppress(OSError):  # the server may close while we still send
                for _ in range(40):
                    s.sendall(b"10000\r\n" + b" " * 0x10000 + b"\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 413")


# ---------------------------------------------------------------------- --no-expert-infos


def test_no_expert_infos_flag():
    with served(["--no-expert-infos", "--threads", "2"]) as base:
        info = requests.get(f"{base}/api/v1/info", timeout=5).json()
        assert info["request_infos"] == []
        r = requests.post(f"{base}/api/v1/sessions", timeout=5,
                          json={"goal": 0, "request_infos": ["expert_action"]})
        assert r.status_code == 403 and "expert_action" in r.json()["error"]
        r = requests.post(f"{base}/api/v1/sessions", json={"goal": 0}, timeout=5)
        assert r.status_code == 201 and "expert_action" not in r.json()["info"]

"""``gagpo serve env`` under abuse: closed and expired sessions free their env, a client that
vanishes costs nothing after the idle timeout, over the session limit a new client gets a
clear refusal, and hostile messages get clear errors without taking the server down or leaking
a session. A real server on 127.0.0.1, raw WebSocket frames."""

from __future__ import annotations

import json
import socket
import time
import urllib.request

import gymnasium as gym
import pytest

pytest.importorskip("openenv", reason="needs the openenv extra: pip install 'gagpo[openenv]'")

from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

import gagpo.envs  # noqa: E402, F401
from gagpo.envs.remote import ENV_ID, RemoteEnvError  # noqa: E402
from gagpo.integrations.openenv.guard import IDLE_CLOSE_CODE  # noqa: E402
from gagpo.integrations.openenv.server import running_server  # noqa: E402

IDLE = 0.6


@pytest.fixture(scope="module")
def server():
    with running_server("ALFWorld-v0", max_sessions=3, idle_timeout=IDLE,
                        max_message_bytes=64_000, max_action_chars=1_000) as s:
        yield s


def ws(server):
    return connect(server.ws_url + "/ws", open_timeout=10, close_timeout=2).__enter__()


def ask(conn, message) -> dict:
    conn.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
    return json.loads(conn.recv(timeout=10))


def eventually(check, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def healthy(server) -> bool:
    return json.load(urllib.request.urlopen(server.url + "/health", timeout=5))["status"] \
        == "healthy"


def test_hostile_messages_get_clear_errors_and_the_session_goes_on(server):
    with ws(server) as conn:
        assert ask(conn, {"type": "reset", "data": {"task": 0}})["type"] == "observation"
        cases = [
            ("not json {", "INVALID_JSON", "Invalid JSON"),
            ("[1, 2, 3]", "INVALID_MESSAGE", "must be a JSON object such as {\"type\": \"step\", "
             "\"data\": {\"command\": ...}}, not a JSON list"),
            ('"step"', "INVALID_MESSAGE", "not a JSON str"),
            (b"\x00\x01binary", "INVALID_MESSAGE", "binary frames are not accepted: send JSON text "
             'such as {"type": "reset", "data": {"task": 0}}'),
            ({"type": "teleport"}, "UNKNOWN_TYPE", "teleport"),
            ({"type": "step", "data": {"command": 5}}, "VALIDATION_ERROR", "Invalid message"),
            ({"type": "step", "data": {}}, "VALIDATION_ERROR", "Invalid message"),
            ({"type": "step", "data": "look"}, "VALIDATION_ERROR", "Invalid message"),
            ({"type": "step", "data": {"command": "x" * 5_000}}, "EXECUTION_ERROR",
             "at most 1000"),
            ({"type": "reset", "data": {"task": "no such game"}}, "EXECUTION_ERROR",
             "no game has the id"),
            ({"type": "reset", "data": {"task": 0, "seed": -1}}, "EXECUTION_ERROR", "seed"),
            ({"type": "reset", "data": {"index": 10**9}}, "EXECUTION_ERROR", "out of range"),
        ]
        for message, code, words in cases:
            answer = ask(conn, message)
            assert answer["type"] == "error", message
            assert answer["data"]["code"] == code, (message, answer)
            assert words in answer["data"]["message"], (message, answer)
        # the session survived all of it (a refused reset leaves no episode, as in process)
        assert "before step" in ask(conn, {"type": "step", "data": {"command": "look"}})[
            "data"]["message"]
        # white space before an object is JSON's own: the message goes through
        assert ask(conn, ' \n\t{"type": "reset", "data": {"task": 0}}')["type"] == "observation"
        assert ask(conn, {"type": "reset", "data": {"task": 0}})["type"] == "observation"
        answer = ask(conn, {"type": "step", "data": {"command": "look"}})
        assert answer["type"] == "observation" and answer["data"]["observation"]["text"]
        assert server.active_sessions() == 1
    assert eventually(lambda: server.active_sessions() == 0)
    assert healthy(server)


def test_a_frame_over_the_size_limit_closes_only_that_connection(server):
    with ws(server) as other, ws(server) as conn:
        ask(conn, {"type": "reset", "data": {"task": 0}})
        conn.send(json.dumps({"type": "step", "data": {"command": "x" * 100_000}}))
        with pytest.raises(ConnectionClosed) as e:
            conn.recv(timeout=10)
        assert e.value.rcvd is not None and e.value.rcvd.code == 1009  # message too big
        assert ask(other, {"type": "reset", "data": {"task": 1}})["type"] == "observation"
    assert eventually(lambda: server.active_sessions() == 0)


def test_unknown_sessions_and_steps_after_close_are_refused(server):
    with connect(server.ws_url + "/ws?session_id=no-such-session", open_timeout=10) as conn:
        answer = json.loads(conn.recv(timeout=10))
        assert answer["type"] == "error" and "Unknown session_id" in answer["data"]["message"]
    with ws(server) as conn:
        ask(conn, {"type": "reset", "data": {"task": 0}})
        conn.send(json.dumps({"type": "close"}))
        with pytest.raises(ConnectionClosed):
            conn.send(json.dumps({"type": "step", "data": {"command": "look"}}))
            conn.recv(timeout=10)
    assert eventually(lambda: server.active_sessions() == 0)


def test_over_the_session_limit_new_clients_get_a_clear_refusal(server):
    held = [ws(server) for _ in range(3)]
    try:
        for conn in held:
            assert ask(conn, {"type": "reset", "data": {"task": 0}})["type"] == "observation"
        for _ in range(10):  # a flood over the limit: each is refused and closed
            with ws(server) as extra:
                answer = json.loads(extra.recv(timeout=10))
                assert answer["data"]["code"] == "CAPACITY_REACHED"
                assert "3" in answer["data"]["message"]
                with pytest.raises(ConnectionClosed):
                    extra.recv(timeout=10)
        assert server.active_sessions() == 3
        env = None
        with pytest.raises(RemoteEnvError, match="CAPACITY_REACHED"):
            env = gym.make(f"gagpo.envs.remote:{ENV_ID}", url=server.url)
        assert env is None
    finally:
        for conn in held:
            conn.close()
    assert eventually(lambda: server.active_sessions() == 0)
    with ws(server) as conn:  # room again
        assert ask(conn, {"type": "reset", "data": {"task": 0}})["type"] == "observation"


def test_idle_sessions_expire_and_a_vanished_client_costs_nothing(server):
    # a client that stops talking mid-episode, its socket left open
    quiet = ws(server)
    ask(quiet, {"type": "reset", "data": {"task": 0}})
    # a client whose TCP connection is cut without a close frame
    vanished = ws(server)
    ask(vanished, {"type": "reset", "data": {"task": 1}})
    vanished.socket.shutdown(socket.SHUT_RDWR)
    # a remote env left idle
    env = gym.make(f"gagpo.envs.remote:{ENV_ID}", url=server.url)
    env.reset(options={"task": 2})
    assert server.active_sessions() >= 1  # the cut one may be gone already (its FIN arrived)
    assert eventually(lambda: server.active_sessions() == 0, timeout=IDLE + 5)
    with pytest.raises(ConnectionClosed) as e:
        quiet.recv(timeout=10)
    assert e.value.rcvd.code == IDLE_CLOSE_CODE and "idle" in e.value.rcvd.reason
    with pytest.raises(RemoteEnvError, match=str(IDLE_CLOSE_CODE)):
        env.step("look")
    obs, info = env.reset(options={"task": 2})  # a new session
    assert info["admissible_actions"] and server.active_sessions() == 1
    env.close()
    quiet.close()
    assert eventually(lambda: server.active_sessions() == 0)
    assert healthy(server)


def test_a_busy_session_does_not_expire(server):
    with ws(server) as conn:
        ask(conn, {"type": "reset", "data": {"task": 0}})
        for _ in range(8):  # active for longer than the idle timeout in all
            time.sleep(IDLE / 3)
            assert ask(conn, {"type": "step", "data": {"command": "look"}})["type"] \
                == "observation"


def test_a_server_on_its_defaults_takes_the_envs_longest_command_and_counts_its_play():
    """Without ``max_action_chars`` a server takes commands up to the env's own
    ``action_space.max_length`` and refuses longer ones; one session is a valid limit and no
    idle timeout a valid choice; a client's action metadata stays on the client (anything may
    be in it); the served env counts the episodes and steps it played, refused ones aside."""
    from gagpo.integrations.openenv.app import build_app
    from gagpo.integrations.openenv.client import GagpoEnvClient
    from gagpo.integrations.openenv.models import TextAction

    probe = gym.make("WebShop-v0")
    limit = int(probe.action_space.max_length)
    probe.close()
    with running_server("WebShop-v0", max_sessions=1, idle_timeout=None) as s:
        served = s.app.served
        assert (served.max_action_chars, served.resets, served.steps) == (limit, 0, 0)
        with GagpoEnvClient(base_url=s.url).sync() as client:
            assert client.state().max_action_chars == limit
            client.reset(task=0, seed=0)
            client.step(TextAction(command="search[red shoes]", metadata={"mine": object()}))
            client.reset(task=1, seed=0)
            with pytest.raises(Exception, match=f"at most {limit}"):
                client.step("x" * (limit + 1))
            assert not client.step("x" * limit).observation.action_valid  # taken, invalid
            client.step("search[blue shirt]")
        assert (served.resets, served.steps) == (2, 3)
        for bad in (dict(max_sessions=0), dict(idle_timeout=0), dict(idle_timeout=-1.0)):
            with pytest.raises(ValueError, match=next(iter(bad))):
                build_app(served, **bad)


def test_a_session_opened_over_http_is_freed_once_idle():
    """OpenEnv also opens sessions over HTTP (its MCP session API, ``POST /mcp``), which no
    WebSocket guard watches: the server's idle timeout reaches them through OpenEnv's own
    reaper (which looks every 5 s), so a client that opens one and vanishes costs nothing
    after it."""
    with running_server("WebShop-v0", max_sessions=2, idle_timeout=1.0) as s:
        body = {"jsonrpc": "2.0", "method": "openenv/session/create", "params": {}, "id": 1}
        req = urllib.request.Request(s.url + "/mcp", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        assert "session_id" in json.load(urllib.request.urlopen(req, timeout=30))["result"]
        assert s.active_sessions() == 1
        assert eventually(lambda: s.active_sessions() == 0, timeout=60)

"""The OpenAI-compatible policy against a real HTTP server on a loopback port that serves the
tiny transformers model through a minimal ``/v1/chat/completions`` endpoint."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from gagpo.agents.models import load_model
from gagpo.agents.policies import OpenAICompatiblePolicy, Policy, TransformersPolicy
from gagpo.agents.policies.base import Request
from gagpo.agents.policies.openai_compat import ServerError

torch.set_num_threads(1)

API_KEY = "test-key"
MODEL = "tiny"


def make_handler(model, tokenizer, lock, log):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep the test output quiet
            pass

        def answer(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            log.append(body)
            if self.path != "/v1/chat/completions":
                return self.answer(404, {"error": {"message": "no such route"}})
            if self.headers.get("Authorization") != f"Bearer {API_KEY}":
                return self.answer(401, {"error": {"message": "bad key"}})
            if body.get("model") != MODEL:
                return self.answer(400, {"error": {"message": "unknown model"}})
            policy = TransformersPolicy(
                model, tokenizer, temperature=body.get("temperature", 1.0),
                top_p=body.get("top_p", 1.0), max_new_tokens=body.get("max_tokens", 16),
                seed=body.get("seed"),
            )
            with lock:  # one generation at a time on the shared model
                (reply,) = policy.act([Request(body["messages"])])
            as_ids = body.get("return_tokens_as_token_ids", False)
            content = [
                {"token": f"token_id:{t}" if as_ids else tokenizer.decode([t]), "logprob": lp,
                 "bytes": None, "top_logprobs": []}
                for t, lp in zip(reply.token_ids, reply.logprobs, strict=True)
            ]
            self.answer(200, {
                "id": "chatcmpl-test", "object": "chat.completion", "model": MODEL,
                "choices": [{
                    "index": 0, "finish_reason": "stop",
                    "message": {"role": "assistant", "content": reply.text},
                    "logprobs": {"content": content} if body.get("logprobs") else None,
                }],
            })

    return Handler


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", device="cpu")


@pytest.fixture(scope="module")
def server(tiny):
    log: list[dict] = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(*tiny, threading.Lock(), log))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", log
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=10)


def reqs():
    texts = ["hi", "find red shoes " * 4, "what now?", "x"]
    return [Request([{"role": "user", "content": t}]) for t in texts]


def test_replies_match_the_model_served(server, tiny):
    url, log = server
    local = TransformersPolicy(*tiny, temperature=0, max_new_tokens=12).act(reqs())
    with OpenAICompatiblePolicy(f"{url}/v1", MODEL, api_key=API_KEY, temperature=0,
                                max_tokens=12, return_token_ids=True, max_workers=4) as policy:
        assert isinstance(policy, Policy)
        remote = policy.act(reqs())  # concurrent, answered in order
        again = policy.act(reqs()[:1])
    for a, b in zip(local, remote, strict=True):
        assert b.text == a.text
        assert b.token_ids == a.token_ids
        torch.testing.assert_close(torch.tensor(b.logprobs), torch.tensor(a.logprobs))
    assert again[0].text == local[0].text
    sent = log[-1]
    assert sent["model"] == MODEL and sent["temperature"] == 0 and sent["max_tokens"] == 12
    assert sent["logprobs"] is True and sent["return_tokens_as_token_ids"] is True


def test_without_token_ids_or_logprobs(server):
    url, _ = server
    # A bare host:port gets /v1; tokens as text carry no ids.
    policy = OpenAICompatiblePolicy(url, MODEL, api_key=API_KEY, temperature=0, max_tokens=8)
    (reply,) = policy.act(reqs()[:1])
    assert reply.text and reply.token_ids == [] and len(reply.logprobs) > 0
    policy = OpenAICompatiblePolicy(url, MODEL, api_key=API_KEY, max_tokens=8, logprobs=False,
                                    seed=3, stop=["</action>"], extra_body={"n": 1})
    (reply,) = policy.act(reqs()[:1])
    assert reply.logprobs == [] and reply.token_ids == []
    policy.close()
    assert policy.act([]) == []


def test_seeded_sampling_is_reproducible(server):
    url, _ = server
    make = lambda: OpenAICompatiblePolicy(url, MODEL, api_key=API_KEY, max_tokens=10,  # noqa: E731
                                          seed=11)
    a, b = make().act(reqs()), make().act(reqs())
    assert [r.text for r in a] == [r.text for r in b]


def test_errors_are_reported(server):
    url, log = server
    n = len(log)
    with pytest.raises(ServerError, match="HTTP 400"):
        OpenAICompatiblePolicy(url, "no-such-model", api_key=API_KEY, retries=3).act(reqs()[:1])
    assert len(log) == n + 1  # a client error is not retried
    with pytest.raises(ServerError, match="HTTP 401"):
        OpenAICompatiblePolicy(url, MODEL, api_key="wrong").act(reqs()[:1])
    # Nothing listens on port 9 of the loopback: the connection error is retried, then raised.
    with pytest.raises(ServerError, match="ConnectionError"):
        OpenAICompatiblePolicy("http://127.0.0.1:9/v1", MODEL, retries=1, timeout=2).act(
            reqs()[:1])

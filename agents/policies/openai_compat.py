"""Any OpenAI-compatible chat server as a policy (vLLM's ``vllm serve``, llama.cpp's server,
hosted APIs), for evaluation.

Plain HTTP with ``requests`` (no ``openai`` package): one ``POST {base_url}/chat/completions``
per request, the batch sent concurrently. Token log-probs come back when the server gives them
(``logprobs: true``); token ids only from servers that can name them: with
``return_token_ids=True`` the policy asks for vLLM's ``return_tokens_as_token_ids`` extension,
whose tokens read ``token_id:<id>``. Otherwise ``Reply.token_ids`` is empty.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import requests

from gagpo.agents.policies.base import Policy, Reply, Request

_TOKEN_ID_PREFIX = "token_id:"


class ServerError(RuntimeError):
    """The server answered with an error, or not at all, after the retries."""


class OpenAICompatiblePolicy(Policy):
    """Chat completions from an OpenAI-compatible server.

    Args:
        base_url: the API root as the ``openai`` client takes it, e.g.
            ``http://localhost:8000/v1``; a bare ``http://host:port`` gets ``/v1``.
        model: the model name the server serves.
        api_key: sent as a bearer token when given.
        temperature, top_p, max_tokens: sampling settings sent with each request.
        timeout: seconds to wait for one reply.
        logprobs: ask for the reply tokens' log-probs.
        return_token_ids: ask for token ids too (vLLM's ``return_tokens_as_token_ids``).
        max_workers: requests in flight at once.
        retries: extra attempts after a connection error or a 5xx/429 answer.
        seed, stop: sent when given (``seed`` is offset by the request's index in the batch
            so that the replies of one batch differ).
        extra_body: more fields merged into every request body.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int = 256,
        timeout: float = 120.0,
        logprobs: bool = True,
        return_token_ids: bool = False,
        max_workers: int = 16,
        retries: int = 2,
        seed: int | None = None,
        stop: list[str] | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        if urlsplit(base).path in ("", "/"):
            base += "/v1"
        self.url = f"{base}/chat/completions"
        self.model = model
        self.api_key = api_key
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.logprobs = logprobs
        self.return_token_ids = return_token_ids
        self.max_workers = max_workers
        self.retries = retries
        self.seed = seed
        self.stop = stop
        self.extra_body = dict(extra_body or {})
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None

    def _session(self) -> requests.Session:
        # One session per thread: connections are reused, and Session is not thread-safe.
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            if self.api_key:
                session.headers["Authorization"] = f"Bearer {self.api_key}"
        return session

    def body(self, request: Request, index: int = 0) -> dict[str, Any]:
        """The JSON body for one request."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
        }
        if self.logprobs:
            body["logprobs"] = True
        if self.return_token_ids:
            body["return_tokens_as_token_ids"] = True
        if self.seed is not None:
            body["seed"] = self.seed + index
        if self.stop:
            body["stop"] = list(self.stop)
        body.update(self.extra_body)
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        delay = 0.5
        for attempt in range(self.retries + 1):
            try:
                resp = self._session().post(self.url, json=body, timeout=self.timeout)
            except requests.RequestException as e:
                error = f"{type(e).__name__}: {e}"
            else:
                if resp.status_code == 200:
                    return resp.json()
                error = f"HTTP {resp.status_code}: {resp.text[:500]}"
                if resp.status_code < 500 and resp.status_code != 429:
                    break  # a client error does not heal by retrying
            if attempt < self.retries:
                time.sleep(delay)
                delay *= 2
        raise ServerError(f"{self.url}: {error}")

    def _reply(self, data: dict[str, Any]) -> Reply:
        choice = data["choices"][0]
        text = (choice.get("message") or {}).get("content") or ""
        logprobs: list[float] = []
        token_ids: list[int] = []
        content = (choice.get("logprobs") or {}).get("content") or []
        if self.logprobs:
            logprobs = [float(t["logprob"]) for t in content]
        if self.return_token_ids:
            tokens = [str(t.get("token", "")) for t in content]
            if tokens and all(t.startswith(_TOKEN_ID_PREFIX) for t in tokens):
                token_ids = [int(t[len(_TOKEN_ID_PREFIX):]) for t in tokens]
        return Reply(text, token_ids, logprobs)

    def act(self, requests: list[Request]) -> list[Reply]:
        """One reply per request, in order; raises :class:`ServerError` on failure."""
        if not requests:
            return []
        bodies = [self.body(r, i) for i, r in enumerate(requests)]
        if self._pool is None:
            # Kept across calls, so that each worker thread keeps its session's connections.
            self._pool = ThreadPoolExecutor(max_workers=self.max_workers)
        results = list(self._pool.map(self._post, bodies))
        return [self._reply(data) for data in results]

    def close(self) -> None:
        """Stop the worker threads (a later ``act`` starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> OpenAICompatiblePolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

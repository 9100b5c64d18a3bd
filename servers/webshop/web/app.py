"""The served shop: one Flask app with two views, HTML pages for people and browsers
(:mod:`~gagpo.servers.webshop.web.pages_view`) and a JSON API for programs
(:mod:`~gagpo.servers.webshop.web.api_view`).

Both keep no per-session memory on the server, so any number of worker processes or hosts can
serve one shop (gunicorn -w N, several hosts behind a load balancer) and nothing needs freeing:
pages take their whole state from the URL, API sessions carry theirs in signed tokens.
Errors are error pages on the pages and ``{"error": message}`` on the API; API responses are
strict JSON (no NaN or Infinity).

The token secret comes from ``secret=``, else ``$GAGPO_WEBSHOP_SECRET``, else a random key
made on first use and kept, owner-only, in the cache folder
(:func:`gagpo.servers.webshop.web.tokens.resolve_secret`): every process of one user on one
machine shares it; shops on several machines need one secret given to each.

The server keeps no sessions, so a client can replay a token: step it again, or buy twice from
one item page. A score reported by a client is therefore only as trustworthy as that client;
the token proves that this shop (or one sharing its secret) produced the state, not that the
episode was played once or without help.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, jsonify, request
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import HTTPException

from gagpo.servers.webshop.html import render_error
from gagpo.servers.webshop.shop import Shop
from gagpo.servers.webshop.web.api_view import ApiViews, is_api_request
from gagpo.servers.webshop.web.pages_view import PageViews
from gagpo.servers.webshop.web.tokens import resolve_secret

MAX_CONTENT_LENGTH = 256 * 1024
"""Request bodies over this many bytes are refused (413)."""

_CSP = "default-src 'self'; img-src * data:; script-src 'self'; style-src 'self'"


def create_app(
    shop: Shop | None = None,
    *,
    secret: str | None = None,
    expert_infos: bool = True,
    api: bool = True,
    **open_shop_kwargs: Any,
) -> Flask:
    """The shop's Flask app.

    Args:
        shop: the shop to serve; ``open_shop(**open_shop_kwargs)`` when None.
        secret: signs API session tokens; see the module docstring for the default.
        expert_infos: whether clients may ask for ``expert_action`` (the goal-aware expert's
            next move, which plays the episode for them); False answers such requests 403.
        api: False serves the HTML pages (and their static files) only: no JSON API, so no
            token secret is read or made (the run viewer mounts such an app to show a run's
            shop in its own process).
    """
    if shop is None:
        from gagpo.servers.webshop import open_shop

        shop = open_shop(**open_shop_kwargs)
    elif open_shop_kwargs:
        raise TypeError("pass either a shop or open_shop arguments, not both")
    app = Flask(__name__, static_folder="static", template_folder=None)
    app.json = _StrictJSON(app)
    app.config["MAX_CONTENT_LENGTH"] = MAX_CONTENT_LENGTH
    app.extensions["gagpo_webshop"] = shop
    PageViews(shop).register(app)
    if api:
        ApiViews(shop, resolve_secret(secret), expert_infos).register(app)
    _register_error_handlers(app)
    return app


class _StrictJSON(DefaultJSONProvider):
    """Flask's JSON, refusing NaN and Infinity (not JSON: clients' parsers reject them). The
    API never has such a number to send; if it ever did, that is a logged 500, not bad JSON."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        kwargs.setdefault("allow_nan", False)
        return super().dumps(obj, **kwargs)


def _register_error_handlers(app: Flask) -> None:
    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException):
        message = e.description or e.name
        # The exception's own headers (a 405's Allow, HTTP requires it), not its content type.
        headers = [(k, v) for k, v in e.get_headers() if k.lower() != "content-type"]
        if is_api_request():
            return jsonify(error=message), e.code, headers
        return render_error(e.code or 500, message, root=request.script_root), e.code, headers

    @app.errorhandler(Exception)
    def crash(e: Exception):
        # Never a traceback to the client; the log keeps it for the operator.
        app.logger.exception("unhandled error on %s %s", request.method, request.path)
        if is_api_request():
            return jsonify(error="internal server error"), 500
        return render_error(500, "Something went wrong on our side.", root=request.script_root), 500

    @app.after_request
    def harden(response: Response) -> Response:
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        if response.mimetype == "text/html":
            response.headers.setdefault("Content-Security-Policy", _CSP)
        return response

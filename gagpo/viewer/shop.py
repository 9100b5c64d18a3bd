"""The WebShop page a run's step saw, rendered in the viewer's own process (no shop server).

A WebShop step's link in the rollout browser opens the page of the state the agent acted in.
The viewer opens the run's shop in this process (:func:`run_shop`: the catalog, goals and
product count its environments were made with, read from ``config.json``'s ``env_kwargs`` for a
training run and from ``summary.json`` for an evaluation), replays the rollout's actions from
the goal's first page with :meth:`~gagpo.servers.webshop.shop.Shop.step`, as WebShop-v0 does
(:func:`replay`), and renders the state reached with the shop's own HTML renderer
(:func:`~gagpo.servers.webshop.html.render_html`), visited products included, as the agent's
HTML observation had them. The shop's page routes are mounted under the viewer
(:func:`site`), so every link of a shown page works as well.

The viewer's pages load nothing from outside this machine: a product image the catalog gives
as a URL of another host (the generated catalog's are Amazon-style CDN addresses) is shown as
the shop's own placeholder image, served from the mount (:func:`local_images`), on the pages
rendered here and on the mounted shop's pages alike.

The replay is checked against what the run recorded before a page is shown: the state key
before each action (the env's ``state_key``, a digest of the state) and the goal's instruction
in the recorded observation. A shop that does not reproduce the run (other catalog files,
other goals, another product count) gets a page that says so, never a page of another
episode; missing catalog files get a page that says which, never a server error.
"""

from __future__ import annotations

import html
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import markupsafe

from gagpo.common.digest import digest
from gagpo.run_folder import read_json
from gagpo.viewer.data import Run

if TYPE_CHECKING:
    from flask import Flask

    from gagpo.servers.webshop.shop import Shop, State

GOAL_KINDS = ("human", "synthetic")
#: ``summary.json``'s ``label`` (the env's ``report_label``) of an evaluation on the embedded
#: generated catalog, on a catalog folder and on a served shop.
LABEL_GENERATED = "WebShop (embedded generated catalog)"
LABEL_FOLDER = "WebShop"
LABEL_SERVED = "WebShop (served shop)"
_ASK_SHOP = ("or open the run's steps on a shop serving its catalog and goals: gagpo serve "
             "webshop, then gagpo view --shop URL")


class ShopProblem(Exception):
    """Why a step's shop page cannot be shown: an HTTP status, a title and a sentence for
    the page that says so."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


@dataclass(frozen=True)
class ShopSource:
    """Which shop a run played on: what :func:`gagpo.servers.webshop.open_shop` takes, and
    where the viewer read it (``origin``, for the pages that explain a problem)."""

    catalog: str | None = None
    """A folder of the original WebShop data files; None: the embedded generated catalog."""
    goals: str = "human"
    num_products: int | None = None
    origin: str = "the defaults"

    @property
    def key(self) -> tuple:
        return (self.catalog, self.goals, self.num_products)

    def describe(self) -> str:
        if self.catalog is None:
            what = f"the embedded generated catalog ({self.num_products or 1000} products)"
        else:
            what = f"the WebShop data files in {self.catalog}"
            if self.num_products is not None:
                what += f" (first {self.num_products} products)"
        return f"{what}, {self.goals} goals"


def shop_source(run: Run) -> ShopSource:
    """The shop ``run``'s environments used.

    A training run's ``config.json`` holds its ``env_kwargs`` (none: the defaults). An
    evaluation's ``summary.json`` holds ``env_kwargs`` where its writer records them; otherwise
    its ``label`` says whether the catalog was the embedded generated one (then the default
    goals and size are assumed, and the replay's checks catch a difference), a folder that it
    does not name, or a served shop.

    Raises:
        ShopProblem: the run played on a served shop or on a folder it does not name, or its
            settings are not ones the env takes.
    """
    if run.kind == "eval":
        summary = read_json(run.path / "summary.json")
        if not isinstance(summary, dict):
            return ShopSource(origin="the defaults (this evaluation has no summary.json yet)")
        if isinstance(summary.get("env_kwargs"), dict):
            return _from_kwargs(summary["env_kwargs"], "summary.json's env_kwargs")
        label = summary.get("label")
        if label == LABEL_SERVED:
            raise ShopProblem(404, "Played on a served shop",
                              "This evaluation played on a shop served over HTTP, whose catalog "
                              "and goals its summary.json does not record. Open its steps on "
                              "that shop: gagpo view --shop URL.")
        if label == LABEL_FOLDER:
            raise ShopProblem(404, "Catalog folder not recorded",
                              "This evaluation played on a folder of WebShop data files that "
                              "its summary.json does not name, so the viewer cannot open its "
                              f"shop; {_ASK_SHOP}.")
        return ShopSource(origin="summary.json (the embedded generated catalog; it records no "
                                 "goals or product count: the defaults)")
    cfg = read_json(run.path / "config.json")
    if not isinstance(cfg, dict):
        return ShopSource(origin="the defaults (the run folder has no config.json)")
    kwargs = cfg.get("env_kwargs")
    return _from_kwargs(kwargs if isinstance(kwargs, dict) else {}, "config.json's env_kwargs")


def _from_kwargs(kwargs: dict[str, Any], origin: str) -> ShopSource:
    url = kwargs.get("server_url")
    if url:
        raise ShopProblem(404, "Played on a served shop",
                          f"This run played on the shop served at {url} ({origin}), whose "
                          "catalog and goals the run does not record. Open its steps on that "
                          f"shop: gagpo view --shop {url}")
    catalog, goals, n = kwargs.get("catalog"), kwargs.get("goals", "human"), \
        kwargs.get("num_products")
    if catalog is not None and not isinstance(catalog, str) or goals not in GOAL_KINDS \
            or n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise ShopProblem(404, "Unknown shop settings",
                          f"The run's shop settings ({origin}: catalog={catalog!r}, "
                          f"goals={goals!r}, num_products={n!r}) are not ones WebShop-v0 "
                          "takes, so the viewer cannot open its shop.")
    return ShopSource(catalog or None, goals, n, origin)


# -- the shop and its mounted pages, per run ------------------------------------------------

_lock = threading.Lock()
_sites: dict[tuple, Flask] = {}


def run_shop(run: Run) -> tuple[Shop, ShopSource]:
    """``run``'s shop, opened in this process (once per catalog, goals and size: shops are
    shared by every run and request that uses them), and where its settings came from.

    Raises:
        ShopProblem: the settings cannot be read (see :func:`shop_source`), or the run's
            catalog files are missing or unreadable here.
    """
    source = shop_source(run)
    if source.catalog is not None:
        _check_catalog_files(source)
    from gagpo.servers.webshop import open_shop

    try:
        shop = open_shop(source.catalog, goals=source.goals,  # type: ignore[arg-type]
                         num_products=source.num_products)
    except Exception as e:  # noqa: BLE001  (user files: any failure becomes a page)
        raise ShopProblem(404, "The run's shop cannot be opened",
                          f"The run played on {source.describe()} ({source.origin}). Opening "
                          f"it here failed: {type(e).__name__}: {e}. Fix or restore those "
                          f"files, {_ASK_SHOP}.") from None
    return shop, source


def _check_catalog_files(source: ShopSource) -> None:
    """A page that names what is missing, before the loader's own error would."""
    from gagpo.servers.webshop.catalog import CATALOG_FILES

    folder = Path(source.catalog or "").expanduser()
    where = f"The run played on the WebShop data files in {source.catalog} ({source.origin})"
    if not folder.is_dir():
        raise ShopProblem(404, "The run's catalog is missing",
                          f"{where}, and {folder.absolute()} is not a folder on this machine "
                          "(a relative path is read from the viewer's working directory). Put "
                          "the original items_shuffle*.json, items_ins_v2*.json and "
                          f"items_human_ins.json there, {_ASK_SHOP}.")
    needed = ["items_shuffle", "items_human_ins" if source.goals == "human" else "items_ins_v2"]
    missing = [f"{stem}*.json" for stem in CATALOG_FILES
               if stem in needed and not any(folder.glob(f"{stem}*.json"))]
    if missing:
        raise ShopProblem(404, "The run's catalog files are missing",
                          f"{where}, and that folder holds no {' and no '.join(missing)}. Put "
                          f"the original files there, {_ASK_SHOP}.")


def site(source: ShopSource, shop: Shop) -> Flask:
    """The shop's HTML pages (no JSON API, so no token secret) as a WSGI app of their own,
    made once per shop: the viewer mounts it under each run that plays on that shop."""
    from gagpo.servers.webshop.web.app import create_app

    with _lock:
        app = _sites.get(source.key)
        if app is None:
            app = _sites[source.key] = create_app(shop, api=False)
        return app


# -- replaying a rollout ---------------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    """What a run recorded of one step: its action, and for the checks the state key before
    it and the observation it was taken on (empty or None where not recorded)."""

    t: int
    action: str
    state_key: str = ""
    observation: str | None = None


def goal_of_task(task_id: str) -> int:
    """``webshop:<i>`` -> i.

    Raises:
        ShopProblem: not a WebShop task id.
    """
    if not task_id.startswith("webshop:") or not task_id[8:].isdigit() or len(task_id) > 20:
        raise ShopProblem(404, "Not a WebShop step", f"Task {task_id!r} is not a WebShop goal.")
    return int(task_id[8:])


def replay(shop: Shop, source: ShopSource, task_id: str, steps: list[Recorded], t: int
           ) -> State:
    """The state at step ``t`` of a rollout of ``task_id`` whose steps are ``steps``: the
    state its action ``t`` was taken in, or for ``t`` one past the last step the state the
    episode ended in (the done page after a purchase). Each action before ``t`` is stepped
    from the goal's first page, as WebShop-v0 steps it.

    Raises:
        ShopProblem: ``t`` is not a step of the rollout (404), or the shop does not reproduce
            the rollout (409): no such goal, another instruction than the recorded
            observations show, or a state key other than the recorded one at some step.
    """
    steps = sorted(steps, key=lambda s: s.t)
    if [s.t for s in steps] != list(range(len(steps))) or not 0 <= t <= len(steps):
        raise ShopProblem(404, "No such step", f"The rollout has no step {t} (or the run "
                                               "recorded only some of its steps).")
    goal = goal_of_task(task_id)
    differs = (f"This shop ({source.describe()}, read from {source.origin}) does not "
               "reproduce the run")
    if goal >= len(shop.goals):
        raise ShopProblem(409, "The run's shop differs", f"{differs}: it has {len(shop.goals)} "
                                                         f"goals, and the run played goal {goal}.")
    instruction = shop.goals[goal].instruction_text.strip()
    seen = next((s.observation for s in steps if s.observation), None)
    if seen is not None and instruction not in seen and \
            str(markupsafe.escape(instruction)) not in seen:
        raise ShopProblem(409, "The run's shop differs",
                          f"{differs}: goal {goal}'s instruction here is {instruction!r}, which "
                          "the run's recorded observations do not show.")
    state = shop.initial_state(goal)
    for s in steps[:t + 1]:
        if s.state_key and s.state_key != digest(*state.key_parts()):
            raise ShopProblem(409, "The run's shop differs",
                              f"{differs}: replaying the rollout's actions reaches, before "
                              f"step {s.t}, another state than the run recorded (other "
                              "catalog files, goals or product count, or a gagpo whose state "
                              "keys differ from the one that recorded the run).")
        if s.t < t:
            state = shop.step(state, s.action).state
    return state


def render_step(shop: Shop, state: State, root: str) -> str:
    """The page of ``state`` as the shop serves it under ``root`` (its links lead there), with
    the session's visited products marked as the agent's HTML observation marked them, and
    images from other hosts shown as the placeholder (:func:`local_images`)."""
    from gagpo.servers.webshop.html import render_html

    return local_images(render_html(shop, state, f"fixed_{state.goal}", root=root), root)


# An <img> tag of the shop's templates, and its src attribute (autoescaped values: no raw quote
# or angle bracket inside).
_IMG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
_SRC = re.compile(r'(\ssrc=")([^"]*)(")', re.IGNORECASE)
_C0_AND_SPACE = "".join(map(chr, range(33)))


def off_site(url: str) -> bool:
    """Whether ``url`` (as written in an attribute: HTML-escaped) names another host, or a
    scheme other than ``data:``; paths on this server do not. Read as browsers read it: tabs
    and newlines dropped, surrounding spaces and control characters stripped, a backslash
    taken for a slash (``\\\\host`` is ``//host``)."""
    text = re.sub(r"[\t\n\r]", "", html.unescape(url)).strip(_C0_AND_SPACE)
    parts = urlsplit(text.replace("\\", "/"))
    return bool(parts.netloc) or parts.scheme.lower() not in ("", "data")


def local_images(page: str, root: str) -> str:
    """``page`` (a shop page mounted under ``root``) with every image whose ``src`` is off
    this server replaced by the shop's placeholder image at ``root/static/``, so that showing
    it loads nothing from outside (the catalog's image URLs point at a CDN)."""
    from gagpo.servers.webshop.html import PLACEHOLDER_IMAGE

    placeholder = str(markupsafe.escape(f"{root}/static/{PLACEHOLDER_IMAGE}"))

    def tag(m: re.Match[str]) -> str:
        return _SRC.sub(lambda s: s.group(0) if not off_site(s.group(2))
                        else f"{s.group(1)}{placeholder}{s.group(3)}", m.group(0))

    return _IMG.sub(tag, page)

"""The run viewer's Flask app: the run list, a run's curves, the rollout browser of one
iteration (or of a ``gagpo eval --out`` folder), and the WebShop page a step saw: rendered here
from the run's own catalog and goals (:mod:`gagpo.viewer.shop`, the shop's pages mounted
under ``/shop-site/<run>/``), or on a live shop given with ``shop_url``.

It reads run folders through :mod:`gagpo.run_folder` and :mod:`gagpo.viewer.data`, and
imports nothing of the trainer's loop, the policies or torch. Every page is drawn on the server
(SVG charts, forms for the filters): its own pages hold no script and load nothing but this
server's style sheet (the shop's pages are the shop's: they load its style sheet, script and
placeholder image from their mount here, the placeholder in place of every product image from
another host). A folder that is missing, empty, being written or from an older
version gets a page that says so, never a server error.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import jinja2
from flask import Flask, Response, redirect, request, url_for
from werkzeug.exceptions import HTTPException

from gagpo.run_folder import UnreadableTable, step_tables
from gagpo.viewer import data
from gagpo.viewer.pages import CSS, TEMPLATES
from gagpo.viewer.plots import DASHES, PALETTE, line_chart
from gagpo.viewer.shop import (
    Recorded,
    ShopProblem,
    goal_of_task,
    local_images,
    render_step,
    replay,
    run_shop,
    site,
)

_CSP = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:"
#: Chip colours for the states of one group, in order of first visit (then spread hues).
CHIP_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                "#17becf", "#bcbd22", "#393b79", "#637939", "#843c39")


def chip_colour(index: int) -> str:
    if index < len(CHIP_COLOURS):
        return CHIP_COLOURS[index]
    return f"hsl({(index * 137.508) % 360:.0f},60%,40%)"


class ViewerApp:
    """Routes bound to the folders to show: ``run_dirs`` (each shown even when missing) or,
    when none, every run under ``root``. ``shop_url``: a served shop (``gagpo serve
    webshop``) that the WebShop steps' links open; None (the default) renders those pages in
    this process, from each run's catalog and goals."""

    def __init__(self, run_dirs: list[str | Path] | None = None, root: str | Path = "runs",
                 shop_url: str | None = None) -> None:
        self.explicit = bool(run_dirs)
        self.roots = [Path(p) for p in run_dirs] if run_dirs else [Path(root)]
        self.shop_url = shop_url.rstrip("/") if shop_url else None
        self.env = jinja2.Environment(loader=jinja2.DictLoader(TEMPLATES), autoescape=True)

    # -- helpers ------------------------------------------------------------------------------

    def runs(self) -> list[data.Run]:
        return data.find_runs(self.roots, self.explicit)

    def run(self, name: str) -> data.Run:
        for r in self.runs():
            if r.name == name:
                return r
        raise _Problem(404, "No such run", f"No run named {name!r} is shown by this viewer.")

    def render(self, template: str, status: int = 200, **ctx: Any) -> Response:
        html = self.env.get_template(template).render(url_for=url_for, **ctx)
        return Response(html, status, mimetype="text/html")

    # -- pages --------------------------------------------------------------------------------

    def index(self) -> Response:
        runs = [(r, data.run_summary(r)) for r in self.runs()]
        where = "given" if self.explicit else f"under {self.roots[0]}/"
        return self.render("index", title="Runs", runs=runs, where=where)

    def run_page(self) -> Response:
        names = request.args.getlist("r")
        if not names:
            return redirect(url_for("index"))
        runs = [self.run(n) for n in dict.fromkeys(names)]
        shown, curves = [], []
        for r in runs:
            problem = None
            if not r.exists:
                problem = f"The folder {r.path} does not exist (yet)."
            elif r.kind == "eval":
                problem = "This is an evaluation's output: open it from the run list."
            summary = data.run_summary(r) if r.exists else {"tables": [], "iterations_logged": 0}
            if r.exists and problem is None and not summary["iterations_logged"] \
                    and not summary["tables"]:
                problem = ("No iteration recorded yet: the run has not finished its first "
                           "iteration (reload to see new ones).")
            shown.append((r, summary, problem))
            curves.append(data.run_curves(r) if r.exists and r.kind == "train" else {})
        charts = []
        for chart_id, title, _, from_zero in data.CHARTS:
            series, legend = [], []
            for i, r in enumerate(runs):
                for j, (label, pts) in enumerate(curves[i].get(chart_id, [])):
                    style = i * len(DASHES) + j
                    name = label if len(runs) == 1 else f"{r.name}: {label}"
                    series.append((name, pts, style))
                    legend.append((name, PALETTE[i % len(PALETTE)], DASHES[j % len(DASHES)]))
            charts.append({"id": chart_id, "title": title, "legend": legend,
                           "svg": line_chart(f"chart-{chart_id}", series, y_from_zero=from_zero)})
        title = " vs ".join(r.name for r in runs)
        status = 404 if all(not r.exists for r in runs) else 200
        return self.render("run", status, title=title, runs=shown, charts=charts,
                           curves_shown=any(r.exists and r.kind == "train" for r in runs),
                           colours=[PALETTE[i % len(PALETTE)] for i in range(len(runs))])

    def iteration_page(self, name: str, it: int) -> Response:
        run = self.run(name)
        if not run.exists:
            raise _Problem(404, f"{name}: missing", f"The folder {run.path} does not exist.")
        paths = step_tables(run.path).get(it)
        if not paths:
            raise _Problem(404, f"{name}: no iteration {it}",
                           f"{run.path} holds no step table for iteration {it} (yet).")
        f = _filters()
        try:
            version, groups = data.iteration_groups(paths)
        except UnreadableTable as e:
            raise _Problem(503, f"{name}: iteration {it} unreadable",
                           f"The step table of iteration {it} cannot be read now ({e}). It may "
                           "be being written or replaced: reload in a moment.") from None
        notes = _version_notes(version)
        task_types = sorted({g["task_type"] for g in groups if g["task_type"]})
        if f["type"]:
            groups = [g for g in groups if g["task_type"] == f["type"]]
        if f["outcome"] == "won":
            groups = [g for g in groups if g["won"] > 0]
        elif f["outcome"] == "lost":
            groups = [g for g in groups if g["won"] < g["rollouts"]]
        if f["shared"]:
            groups = [g for g in groups if g["shared"] > 0]
        wanted = request.args.get("group", type=int)
        if wanted is None or wanted not in {g["group"] for g in groups}:
            wanted = groups[0]["group"] if groups else None
        for g in groups:
            g["href"] = url_for("iteration_page", name=name, it=it, group=g["group"],
                                **_filter_args(f))
        columns, group_title = [], ""
        if wanted is not None:
            cfg = data.read_json(run.path / "config.json") or {}
            gamma = float(cfg.get("gamma", 1.0)) if isinstance(cfg, dict) else 1.0
            try:
                _, group = data.load_group(paths, wanted, gamma)
            except UnreadableTable as e:
                raise _Problem(503, f"{name}: iteration {it} unreadable",
                               f"The step table of iteration {it} cannot be read now ({e}): "
                               "reload in a moment.") from None
            if group is not None:
                webshop = group.task_id.startswith("webshop:")
                columns = self._columns(
                    group.rollouts, f, shop=(lambda traj, t: url_for(
                        "shop_page", name=name, it=it, traj=traj, t=t))
                    if webshop else None)
                group_title = (f"Group {group.group}: task {group.task_id}"
                               + (f" ({group.task_type})" if group.task_type else "")
                               + f", {len(group.rollouts)} rollouts")
        return self.render("rollouts", title=f"{name}, iteration {it}", run=run, it=it,
                           notes=notes, groups=groups, group=wanted, task_types=task_types,
                           f=f, has_adv=True, columns=columns, group_title=group_title)

    def eval_page(self, name: str) -> Response:
        run = self.run(name)
        if not (run.path / data.EVAL_FILE).is_file():
            raise _Problem(404, f"{name}: no trajectories",
                           f"{run.path} holds no {data.EVAL_FILE} (gagpo eval --out DIR writes "
                           "it).")
        f = _filters()
        episodes = data.eval_episodes(run)
        task_types = sorted({e.task_type for e in episodes if e.task_type})
        chosen = [e for e in episodes if (not f["type"] or e.task_type == f["type"])
                  and (not f["outcome"] or e.won == (f["outcome"] == "won"))]
        pages = [chosen[i:i + data.EVAL_PAGE] for i in range(0, len(chosen), data.EVAL_PAGE)]
        groups = [{"group": k, "task_id": f"{p[0].task_id} .. {p[-1].task_id}",
                   "task_type": ", ".join(sorted({e.task_type for e in p})),
                   "rollouts": len(p), "won": sum(e.won for e in p),
                   "steps": sum(len(e.steps) for e in p),
                   "href": url_for("eval_page", name=name, group=k, **_filter_args(f))}
                  for k, p in enumerate(pages)]
        wanted = request.args.get("group", type=int)
        if wanted is None or not 0 <= wanted < len(pages):
            wanted = 0 if pages else None
        webshop = bool(episodes) and episodes[0].task_id.startswith("webshop:")
        columns = [] if wanted is None else self._columns(
            pages[wanted], f, shop=(lambda traj, t: url_for(
                "shop_eval", name=name, index=traj, t=t)) if webshop else None)
        notes = ["An evaluation: one episode per task, no advantages (rollouts of one page "
                 "are different tasks)."]
        return self.render("rollouts", title=f"{name} (evaluation)", run=run, it=None,
                           notes=notes, groups=groups, group=wanted, task_types=task_types,
                           f=f, has_adv=False, columns=columns,
                           group_title=f"Page {wanted}" if wanted is not None else "")

    def _columns(self, rollouts: list[data.Rollout], f: dict[str, Any], shop: Any
                 ) -> list[dict[str, Any]]:
        """The rollouts as columns of display-ready steps (filters applied, chips coloured by
        first visit, bars scaled to the largest magnitude shown). ``shop(trajectory, t)``: the
        link to the shop page of step t (None: no links); the last step also links to the
        page its action led to (t + 1: the done page after a purchase)."""
        rollouts = [r for r in rollouts if not f["outcome"] or r.won == (f["outcome"] == "won")]
        counts: dict[str, int] = {}
        order: dict[str, int] = {}
        for s in sorted((s for r in rollouts for s in r.steps), key=lambda s: (s.t,
                                                                                s.trajectory)):
            counts[s.state_key] = counts.get(s.state_key, 0) + 1
            order.setdefault(s.state_key, len(order))
        scales = {}
        for attr in ("advantage", "value", "critic_value", "td_error"):
            vals = [abs(getattr(s, attr)) for r in rollouts for s in r.steps
                    if getattr(s, attr) is not None and math.isfinite(getattr(s, attr))]
            scales[attr] = max(vals, default=0.0) or 1.0
        labels = {"advantage": "advantage", "value": "V(s)", "critic_value": "critic V",
                  "td_error": "TD error"}
        columns = []
        for r in rollouts:
            steps = []
            for s in r.steps:
                shared = (s.group_size or 0) > 1
                d = dict(vars(s))
                d["hidden"] = bool(f["shared"]) and s.group_size is not None and not shared
                d["unshared"] = counts.get(s.state_key, 0) <= 1 and not shared
                d["colour"] = chip_colour(order.get(s.state_key, 0))
                d["zero"] = s.advantage is not None and s.advantage == 0.0
                d["bars"] = [{"label": labels[a], "value": getattr(s, a),
                              "text": f"{getattr(s, a):+.4g}", "cls": a,
                              "width": min(50.0, 50.0 * abs(getattr(s, a)) / scales[a])}
                             for a in ("advantage", "value", "critic_value", "td_error")
                             if getattr(s, a) is not None and math.isfinite(getattr(s, a))]
                d["shop"] = shop(s.trajectory, s.t) if shop is not None else None
                d["shop_after"] = (shop(s.trajectory, s.t + 1)
                                   if shop is not None and s is r.steps[-1] else None)
                steps.append(d)
            columns.append({"trajectory": r.trajectory, "won": r.won, "score": r.score,
                            "task_type": r.task_type, "steps": steps})
        return columns

    # -- the shop page a step saw -------------------------------------------------------------

    def shop_page(self, name: str, it: int, traj: int, t: int) -> Response:
        run = self.run(name)
        paths = step_tables(run.path).get(it) if run.exists else None
        if not paths:
            raise _Problem(404, "No such step", f"{run.path} holds no iteration {it}.")
        try:
            table = data.read_step_table(paths, ["trajectory", "t", "task_id", "action",
                                                 "state_key", "observation"])
        except UnreadableTable as e:
            raise _Problem(503, "Step table unreadable", f"{e}: reload in a moment.") from None
        rows = [i for i in range(len(table["trajectory"])) if table["trajectory"][i] == traj]
        if not rows:
            raise _Problem(404, "No such step", f"Iteration {it} has no rollout {traj}.")
        col = table.get
        steps = [Recorded(int(table["t"][i]), str(table["action"][i]),
                          str(col("state_key")[i]) if col("state_key") is not None else "",
                          str(col("observation")[i]) if col("observation") is not None
                          else None) for i in rows]
        return self._shop_step(run, str(table["task_id"][rows[0]]), steps, t)

    def shop_eval(self, name: str, index: int, t: int) -> Response:
        run = self.run(name)
        episode = next((e for e in data.eval_episodes(run) if e.trajectory == index), None)
        if episode is None:
            raise _Problem(404, "No such step", f"{name} has no episode {index}.")
        steps = [Recorded(s.t, s.action, s.state_key,
                          s.observation if isinstance(s.observation, str) else None)
                 for s in episode.steps]
        return self._shop_step(run, episode.task_id, steps, t)

    def _shop_step(self, run: data.Run, task_id: str, steps: list[Recorded], t: int
                   ) -> Response:
        """The shop page of step ``t`` (``t`` = the number of steps: the page the last action
        led to): rendered here from the run's shop, or on the live shop at ``shop_url``."""
        goal_of_task(task_id)
        if not any(s.t == t for s in steps) and t != max((s.t for s in steps), default=-1) + 1:
            raise _Problem(404, "No such step", f"{run.name} has no step {t} of this rollout.")
        if self.shop_url is not None:
            ordered = sorted(steps, key=lambda s: s.t)
            return self._replay_live(task_id, [s.action for s in ordered if s.t < t])
        shop, source = run_shop(run)
        state = replay(shop, source, task_id, steps, t)
        root = url_for("shop_site", name=run.name).rstrip("/")
        return Response(render_step(shop, state, root), mimetype="text/html")

    def shop_site(self, name: str, rest: str = "") -> Response:
        """The run's shop, every page of it, as the shop serves them (its own app, mounted
        here), so that every link of a step's page works."""
        run = self.run(name)
        shop, source = run_shop(run)
        environ = dict(request.environ)
        # The URL form of the mount: the shop writes its script root verbatim into its links.
        environ["SCRIPT_NAME"] = url_for("shop_site", name=name).rstrip("/")
        environ["PATH_INFO"] = ("/" + rest).encode("utf-8").decode("latin-1")  # WSGI's form
        resp = Response.from_app(site(source, shop), environ, buffered=True)
        if resp.mimetype == "text/html":  # no image from another host (see local_images)
            resp.set_data(local_images(resp.get_data(as_text=True), environ["SCRIPT_NAME"]))
        return resp

    def _replay_live(self, task_id: str, actions: list[str]) -> Response:
        """Replay ``actions`` on the served shop's API from the task's first page, and send
        the browser to that shop's page of the state reached (rebuilt from the session
        token, which holds the whole state)."""
        try:
            # A session long enough for the whole replay (a run may have had a longer step
            # limit than the shop's default).
            reply = _post(f"{self.shop_url}/api/v1/sessions",
                          {"goal": goal_of_task(task_id), "max_steps": max(1, len(actions))})
            for a in actions:
                reply = _post(f"{self.shop_url}/api/v1/sessions/step",
                              {"session": reply["session"], "action": a})
            url = shop_url_of(self.shop_url or "", reply["session"])  # BadToken: a ValueError
        except (OSError, ValueError, KeyError) as e:
            raise _Problem(
                502, "No shop to show the page",
                f"The shop at {self.shop_url} did not answer ({e}). Start one with the run's "
                "catalog and goals (gagpo serve webshop), or leave out --shop to render the "
                "page in the viewer from the run's own catalog.") from None
        return redirect(url)

    # -- registration -------------------------------------------------------------------------

    def register(self, app: Flask) -> None:
        add = app.add_url_rule
        add("/", "index", self.index)
        add("/run", "run_page", self.run_page)
        add("/run/<name>/iter/<int:it>", "iteration_page", self.iteration_page)
        add("/eval/<name>", "eval_page", self.eval_page)
        add("/shop/<name>/<int:it>/<int:traj>/<int:t>", "shop_page", self.shop_page)
        add("/shop-eval/<name>/<int:index>/<int:t>", "shop_eval", self.shop_eval)
        both = ["GET", "POST"]  # the shop's search box posts its query
        add("/shop-site/<name>/", "shop_site", self.shop_site, methods=both)
        add("/shop-site/<name>/<path:rest>", "shop_site", self.shop_site, methods=both)
        add("/view.css", "css", lambda: Response(CSS, mimetype="text/css"))


class _Problem(ShopProblem):
    """A page that says what is missing or wrong, with its HTTP status."""


def _filters() -> dict[str, Any]:
    outcome = request.args.get("outcome", "")
    return {"type": request.args.get("type", ""),
            "outcome": outcome if outcome in ("won", "lost") else "",
            "shared": request.args.get("shared") == "1"}


def _filter_args(f: dict[str, Any]) -> dict[str, Any]:
    return {k: ("1" if v is True else v) for k, v in f.items() if v}


def _version_notes(version: int) -> list[str]:
    if version < 2:
        return ["This step table was written by an older gagpo (step table version "
                f"{version}): it holds no replies, observations or task types; the actions, "
                "state keys and advantages are shown."]
    return []


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310  (our own shop)
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise ValueError(f"HTTP {e.code}: {e.read()[:200]!r}") from None


def shop_url_of(base: str, token: str) -> str:
    """The served shop's page of the state in session ``token`` (the token is signed, not
    encrypted: its state is read without the secret; the shop checks what it serves)."""
    from gagpo.servers.webshop.html import state_url
    from gagpo.servers.webshop.web.tokens import read_state

    state = read_state(token)
    return state_url(base, f"fixed_{state.goal}", state)


def create_app(run_dirs: list[str | Path] | None = None, root: str | Path = "runs",
               shop_url: str | None = None) -> Flask:
    """The viewer's app (see :class:`ViewerApp`)."""
    app = Flask(__name__, static_folder=None, template_folder=None)
    views = ViewerApp(run_dirs, root, shop_url)
    views.register(app)

    @app.errorhandler(ShopProblem)
    def problem(e: ShopProblem) -> Response:
        return views.render("error", e.status, title=e.title, message=e.message)

    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException) -> Response:
        return views.render("error", e.code or 500, title=f"{e.code} {e.name}",
                            message=e.description or "")

    @app.after_request
    def headers(resp: Response) -> Response:
        resp.headers["Content-Security-Policy"] = _CSP
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Cache-Control"] = "no-store"  # a run being written changes on reload
        return resp

    return app


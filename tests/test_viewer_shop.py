"""``gagpo view``'s WebShop step links with no shop running: the viewer renders the page a step
saw in its own process, from the run's catalog and goals (gagpo/viewer/shop.py).

An episode is played on WebShop-v0 in-process through every page kind (search, results and
their pages, item, item with options chosen, each sub-page, an invalid action, back to search,
the done page) and written as a training run (a step table) and as an evaluation
(trajectories.jsonl). For every step, the page its link serves must be the page the shop's own
Flask app serves for the same state (byte for byte once the mount's URL prefix is taken out,
the visited marks, which the served URL pages do not track, are dropped, and the product
images, which the viewer shows as the shop's placeholder rather than load from their CDN, are
put back), and the page the agent's HTML observation was; the links of those pages work
through the viewer, and none of them loads anything from another host. Runs whose shop cannot
be opened (catalog files missing, a served shop, another shop than the run's) get a page that
says why, never a server error.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import fields, replace
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import numpy as np
import pytest
from bs4 import BeautifulSoup
from shop_pages import (
    html_clickables_original_order,
    html_has_search_bar,
    html_to_text,
    html_to_text_rich,
    write_tricky_catalog,
)

from gagpo.agents.rollout import StepRow, StepTable
from gagpo.envs.webshop.env import WebShopEnv
from gagpo.run_folder import save_step_table, write_json
from gagpo.servers.webshop import open_shop
from gagpo.servers.webshop.html import render_html, state_url
from gagpo.servers.webshop.shop import Shop, State
from gagpo.servers.webshop.web.app import create_app as shop_app
from gagpo.viewer.app import create_app

N_PRODUCTS = 200


def _goal_with_options(shop: Shop) -> int:
    for i, goal in enumerate(shop.goals[:300]):
        product = shop.catalog.get(goal.asin)
        if product is not None and any(v.strip() for vs in product.options.values()
                                       for v in vs):
            return i
    pytest.skip("no goal product with options")


def _script(shop: Shop, goal: int) -> list[str]:
    """Actions that visit every page kind of ``goal``'s product, then buy it."""
    product = shop.catalog.get(shop.goals[goal].asin)
    query = product.title.replace("[", " ").replace("]", " ")
    state = shop.step(shop.initial_state(goal), f"search[{query}]").state
    hit = product.asin.lower()
    if hit not in shop.page(state).clickables:
        hit = next(c for c in shop.page(state).clickables if shop.catalog.get(c) is not None)
        product = shop.catalog.get(hit)
    options = [next(v for v in vs if v.strip()) for vs in product.options.values()
               if any(v.strip() for v in vs)]
    return [f"search[{query}]", "click[back to search]", f"search[{query}]", "click[next >]",
            "click[< prev]", f"click[{hit}]", "click[< prev]",  # results, visited marked
            f"click[{hit}]", "click[no such button]",  # an invalid action: a no-op
            *[f"click[{v}]" for v in options],
            "click[description]", "click[< prev]", "click[features]", "click[< prev]",
            "click[reviews]", "click[< prev]", "click[buy now]"]


def _play(env: WebShopEnv, goal: int, actions: list[str]) -> tuple[list[StepRow], list[str]]:
    """The episode as the rollout records it (state key before each action, observation),
    and the HTML observation (the page the agent saw) at each step and after the last."""
    obs, info = env.reset(options={"task": goal})
    rows, pages = [], [obs]
    for t, action in enumerate(actions):
        new_obs, reward, terminated, truncated, new_info = env.step(action)
        rows.append(StepRow(
            group=0, trajectory=0, t=t, task_id=info["task_id"], task_type=info["task_type"],
            state_key=info["state_key"], observation=obs, request=None,
            reply=f"<action>{action}</action>", action=action, well_formed=True,
            action_valid=new_info["action_valid"], reward=reward,
            done=terminated or truncated, terminated=terminated, won=new_info["won"],
            score=new_info["score"]))
        obs, info = new_obs, new_info
        pages.append(obs)
    assert rows[-1].terminated and rows[-1].reward > 0
    return rows, pages


@pytest.fixture(scope="module")
def shop() -> Shop:
    return open_shop(num_products=N_PRODUCTS)


@pytest.fixture(scope="module")
def episode(shop):
    """(goal, actions, recorded rows, the agent's HTML pages, the states at each step)."""
    goal = _goal_with_options(shop)
    actions = _script(shop, goal)
    env = WebShopEnv(observation_mode="html", num_products=N_PRODUCTS, max_steps=100)
    try:
        rows, pages = _play(env, goal, actions)
    finally:
        env.close()
    states = [shop.initial_state(goal)]
    for a in actions:
        states.append(shop.step(states[-1], a).state)
    kinds = {(s.page, bool(s.options), s.sub_page, bool(s.visited) and s.page == "results",
              s.page_num) for s in states}
    assert {k[0] for k in kinds} == {"search", "results", "item", "item_sub", "done"}
    assert ("item", True, "", False, 1) in kinds and ("results", False, "", True, 1) in kinds
    assert ("results", False, "", False, 2) in kinds
    assert not rows[8].action_valid  # the invalid action
    return goal, actions, rows, pages, states


def _train_run(folder: Path, rows: list[StepRow], env_kwargs: dict | None) -> Path:
    (folder / "steps").mkdir(parents=True)
    if env_kwargs is not None:
        write_json(folder / "config.json", {"env": "WebShop-v0", "env_kwargs": env_kwargs})
    n = len(rows)
    save_step_table(folder / "steps" / "iter_00001.npz", StepTable(rows, 1, 1),
                    {"advantage": np.zeros(n, np.float32), "value": np.zeros(n, np.float32)},
                    True)
    return folder


def _eval_run(folder: Path, rows: list[StepRow], summary: dict | None) -> Path:
    folder.mkdir(parents=True)
    with open(folder / "trajectories.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            row = {f.name: getattr(r, f.name) for f in fields(r) if f.name != "request"}
            f.write(json.dumps(row | {"prompt": [], "task_index": 5}) + "\n")
    if summary is not None:
        write_json(folder / "summary.json", summary)
    return folder


def _unmounted(page: str, root: str) -> str:
    """The page as served at the top (the mount's prefix out of its links)."""
    assert root.startswith("/shop-site/")
    return page.replace(f'"{root}/', '"/')


PLACEHOLDER = "/static/placeholder.svg"  # the shop's own, served from its mount in the viewer


def _placeholders(page: str) -> str:
    """A page served at the top with its product images from another host shown as the
    placeholder, as the viewer shows them."""
    return re.sub(r'(<img [^>]*src=")https?://[^"]*"', rf'\g<1>{PLACEHOLDER}"', page)


def _same_page(mine: str, served: str, root: str, state: State) -> None:
    """The viewer's page of ``state`` against the shop's own served page of it."""
    assert html_to_text(mine) == html_to_text(served)  # the text the agent read
    assert html_clickables_original_order(mine) == html_clickables_original_order(served)
    assert html_has_search_bar(mine) == html_has_search_bar(served)
    # Byte for byte, but for the visited marks (the served pages keep no session memory) and
    # the images (the placeholder in the viewer).
    assert _unmounted(mine, root).replace(' data-visited="true"', "") == _placeholders(served)
    if state.page == "results" and state.visited:
        assert ' data-visited="true"' in mine and ' data-visited="true"' not in served


def _served(shop_client, state: State) -> str:
    r = shop_client.get(state_url("", f"fixed_{state.goal}", state))
    assert r.status_code == 200
    return r.get_data(as_text=True)


def test_each_step_link_serves_the_page_the_shop_serves_for_that_state(shop, episode, tmp_path):
    goal, actions, rows, pages, states = episode
    run = _train_run(tmp_path / "train run", rows, {"num_products": N_PRODUCTS})
    viewer = create_app([run]).test_client()
    served = shop_app(shop, api=False).test_client()
    root = "/shop-site/train%20run"
    group = viewer.get("/run/train%20run/iter/1").get_data(as_text=True)
    links = re.findall(r'class="shoplink[^"]*" href="([^"]+)"', group)
    assert links == [f"/shop/train%20run/1/0/{t}" for t in range(len(actions) + 1)]
    for t, state in enumerate(states):
        r = viewer.get(f"/shop/train%20run/1/0/{t}")
        assert r.status_code == 200 and r.mimetype == "text/html", (t, r.data[:300])
        mine = r.get_data(as_text=True)
        _same_page(mine, _served(served, replace(state, visited=frozenset())), root, state)
        # ... and the very page the agent's HTML observation was (visited marks included).
        assert _unmounted(mine, root) == _placeholders(pages[t])
        assert pages[t] == render_html(shop, state)
        if state.page != "done":
            assert html_to_text_rich(mine) == html_to_text_rich(pages[t])


def test_an_evaluations_step_links_serve_the_same_pages(shop, episode, tmp_path):
    goal, actions, rows, pages, states = episode
    run = _eval_run(tmp_path / "ev", rows, {"env": "WebShop-v0",
                                             "label": "WebShop (embedded generated catalog)",
                                             "env_kwargs": {"num_products": N_PRODUCTS}})
    viewer = create_app([run]).test_client()
    served = shop_app(shop, api=False).test_client()
    page = viewer.get("/eval/ev").get_data(as_text=True)
    assert f'href="/shop-eval/ev/5/{len(actions)}"' in page  # the page after the last step
    for t in (0, 3, 5, 9, len(actions)):
        r = viewer.get(f"/shop-eval/ev/5/{t}")
        assert r.status_code == 200, (t, r.data[:300])
        _same_page(r.get_data(as_text=True),
                   _served(served, replace(states[t], visited=frozenset())),
                   "/shop-site/ev", states[t])


def test_the_links_of_a_step_page_work_in_the_viewer(shop, episode, tmp_path):
    """Links, buttons, option links, the search box and static files of a shown page lead to
    the shop's own pages, through the viewer."""
    goal, actions, rows, pages, states = episode
    run = _train_run(tmp_path / "r", rows, {"num_products": N_PRODUCTS})
    viewer = create_app([run]).test_client()
    served = shop_app(shop, api=False).test_client()
    root = "/shop-site/r"
    t = next(t for t, s in enumerate(states) if s.page == "item" and s.options)
    soup = BeautifulSoup(viewer.get(f"/shop/r/1/0/{t}").get_data(as_text=True), "html.parser")
    targets = [f["action"] for f in soup.find_all("form", method="get")]
    targets += [i["data-url"] for i in soup.select('input[type="radio"][data-url]')]
    targets += [tag.get("href") or tag["src"]
                for tag in soup.select('link[rel="stylesheet"], script[src]')]
    assert len(targets) >= 6 and all(u.startswith(f"{root}/") for u in targets)
    for url in targets:
        mine, theirs = viewer.get(url), served.get(url[len(root):])
        assert mine.status_code == theirs.status_code == 200, url
        if mine.mimetype == "text/html":
            mine_page = _unmounted(mine.get_data(as_text=True), root)
            assert mine_page == _placeholders(theirs.get_data(as_text=True))
        else:
            assert mine.data == theirs.data
    assert states[0].page == "search"  # the page with the search box
    soup = BeautifulSoup(viewer.get("/shop/r/1/0/0").get_data(as_text=True), "html.parser")
    form = soup.find(id="search_input").find_parent("form")
    query = {"search_query": "blue shirt"}
    mine = viewer.post(form["action"], data=query, follow_redirects=True)
    theirs = served.post(form["action"][len(root):], data=query, follow_redirects=True)
    assert mine.status_code == theirs.status_code == 200
    assert mine.request.path.startswith(f"{root}/search_results/")
    assert _unmounted(mine.get_data(as_text=True), root) == \
        _placeholders(theirs.get_data(as_text=True))
    # A state the URL cannot hold is the shop's own error page, not a viewer error.
    bad = viewer.get(f"{root}/item_page/fixed_0/NOPE/x/1/%7B%7D")
    assert bad.status_code == 404 and "No product with that ASIN" in bad.get_data(as_text=True)


def test_a_run_on_original_data_files_uses_them(tmp_path):
    """A run on a catalog folder (the original files' format) opens that folder's shop."""
    folder = write_tricky_catalog(tmp_path / "catalog")
    shop = open_shop(folder)
    actions = _script(shop, 0)[:6]
    env = WebShopEnv(observation_mode="html", catalog=str(folder), max_steps=100)
    try:
        obs, info = env.reset(options={"task": 0})
        rows, states = [], [shop.initial_state(0)]
        for t, a in enumerate(actions):
            rows.append(StepRow(0, 0, t, info["task_id"], info["task_type"], info["state_key"],
                                obs, None, a, a, True, True, 0.0, False, False, False, 0.0))
            obs, _, _, _, info = env.step(a)
            states.append(shop.step(states[-1], a).state)
    finally:
        env.close()
    run = _train_run(tmp_path / "orig", rows, {"catalog": str(folder)})
    viewer = create_app([run]).test_client()
    served = shop_app(shop, api=False).test_client()
    for t, state in enumerate(states):
        r = viewer.get(f"/shop/orig/1/0/{t}")
        assert r.status_code == 200, (t, r.data[:300])
        _same_page(r.get_data(as_text=True), _served(served, replace(state, visited=frozenset())),
                   "/shop-site/orig", state)


def _problem(client, url: str, status: int, *words: str) -> str:
    r = client.get(url)
    text = r.get_data(as_text=True)
    assert r.status_code == status, (url, r.status_code, text[:500])
    assert r.mimetype == "text/html"
    for w in words:
        assert w in text, (w, text)
    return text


def test_missing_catalog_files_get_a_page_that_says_what_is_missing(episode, tmp_path):
    rows = episode[2]
    nowhere = tmp_path / "webshop-data"
    c = create_app([_train_run(tmp_path / "gone", rows, {"catalog": str(nowhere)})]).test_client()
    for url in ("/shop/gone/1/0/0", "/shop/gone/1/0/3", "/shop-site/gone/fixed_0"):
        _problem(c, url, 404, "missing", str(nowhere), "items_shuffle", "--shop")
    nowhere.mkdir()
    (nowhere / "items_human_ins.json").write_text("{}")
    _problem(c, "/shop/gone/1/0/3", 404, "holds no items_shuffle*.json", "--shop")
    (nowhere / "items_shuffle_1000.json").write_text("{}")  # not the original's list
    _problem(c, "/shop/gone/1/0/3", 404, "cannot be opened", str(nowhere))
    ev = _eval_run(tmp_path / "ev", rows, {"label": "WebShop"})
    _problem(create_app([ev]).test_client(), "/shop-eval/ev/5/1", 404, "does not name",
             "--shop")


def test_a_run_on_a_served_shop_or_another_shop_gets_a_page_that_says_so(episode, tmp_path):
    rows = episode[2]
    url = "http://10.0.0.7:3000"
    c = create_app([_train_run(tmp_path / "srv", rows, {"server_url": url})]).test_client()
    _problem(c, "/shop/srv/1/0/2", 404, "served", f"--shop {url}")
    # Other goals than the run's: the instruction differs from the recorded observations'.
    c = create_app([_train_run(tmp_path / "syn", rows, {"num_products": N_PRODUCTS,
                                                         "goals": "synthetic"})]).test_client()
    _problem(c, "/shop/syn/1/0/2", 409, "does not reproduce", "instruction")
    # A recorded state key the replay does not reach.
    tampered = [replace(r, state_key="0123456789ab") if r.t == 4 else r for r in rows]
    c = create_app([_train_run(tmp_path / "key", tampered, {"num_products": N_PRODUCTS})]
                   ).test_client()
    assert c.get("/shop/key/1/0/4").status_code == 409
    assert c.get("/shop/key/1/0/3").status_code == 200  # the steps before it still open
    _problem(c, "/shop/key/1/0/99", 404, "no step 99")
    _problem(c, "/shop-site/nope/", 404, "No such run")


# -- nothing from another host: the viewer's shop pages load only from the viewer ------------

_LOCAL_HOSTS = ("localhost", "127.0.0.1")
_CSS_URL = re.compile(r"""url\(\s*(["']?)(.*?)\1\s*\)|@import\s+(["'])(.*?)\3""", re.I | re.S)


def _css_urls(css: str) -> list[str]:
    return [m.group(2) if m.group(2) is not None else m.group(4) for m in _CSS_URL.finditer(css)]


def _references(body: str, mimetype: str) -> tuple[list[str], list[str]]:
    """Every URL a page, style sheet or image names for the browser to load or follow (src,
    href, srcset, action, data-url, data-fallback, CSS url() and @import; an SVG's href), and
    of those the ones the crawl follows (GET links, forms that get, option links, sources)."""
    if mimetype == "text/css":
        return _css_urls(body), []
    if mimetype == "image/svg+xml":
        return re.findall(r'href="([^"]*)"', body) + _css_urls(body), []
    if mimetype != "text/html":
        return [], []
    soup = BeautifulSoup(body, "html.parser")
    named, follow = [], []
    for tag in soup.find_all(True):
        for attr in ("src", "href", "action", "data-url", "data-fallback", "poster"):
            if tag.get(attr) is not None:
                named.append(tag[attr])
                if attr != "action" or (tag.get("method") or "get").lower() == "get":
                    follow.append(tag[attr])
        for attr in ("srcset", "imagesrcset"):
            if tag.get(attr):
                named += [c.strip().split()[0] for c in tag[attr].split(",") if c.strip()]
        if tag.get("style"):
            named += _css_urls(tag["style"])
        if tag.name == "style":
            named += _css_urls(tag.get_text())
    return named, follow


def _off_this_machine(url: str, page: str) -> bool:
    full = urlsplit(urljoin(f"http://localhost{page}", url.strip()))
    if full.scheme == "data":
        return False
    return full.scheme not in ("http", "https") or full.hostname not in _LOCAL_HOSTS


def test_the_viewers_shop_pages_load_nothing_from_another_host(shop, episode, tmp_path):
    """A crawl of a small run's shop pages in the viewer (every step's page, then every link,
    option, sub-page and static file they lead to) finds no reference to another host: the
    product images, which the shop itself serves from their CDN, are the placeholder, served
    by the viewer with 200."""
    goal, actions, rows, pages, states = episode
    run = _train_run(tmp_path / "small run", rows, {"num_products": N_PRODUCTS})
    viewer = create_app([run]).test_client()
    group = viewer.get("/run/small%20run/iter/1").get_data(as_text=True)
    start = re.findall(r'class="shoplink[^"]*" href="([^"]+)"', group)
    assert len(start) == len(actions) + 1
    queue, seen, outside, images = deque(start), set(start), [], set()
    kinds, visited = set(), 0
    while queue and visited < 200:
        url, visited = queue.popleft(), visited + 1
        r = viewer.get(url)
        if r.status_code in (301, 302, 303, 307, 308):  # the done page's new session
            named, follow = [r.headers["Location"]], [r.headers["Location"]]
        else:
            assert r.status_code == 200, (url, r.status_code)
            text = r.mimetype.startswith(("text/", "image/svg"))
            named, follow = _references(r.get_data(as_text=True) if text else "", r.mimetype)
        outside += [(url, u) for u in named if _off_this_machine(u, url)]
        if r.status_code == 200 and r.mimetype == "text/html":
            soup = BeautifulSoup(r.get_data(as_text=True), "html.parser")
            kinds.update(c for c in soup.body.get("class", []) if c.startswith("page-"))
            images.update(img["src"] for img in soup.find_all("img"))
        for u in follow:
            path = urlsplit(urljoin(f"http://localhost{url}", u))
            path = path.path + (f"?{path.query}" if path.query else "")
            if not _off_this_machine(u, url) and path.startswith(("/shop/", "/shop-site/")) \
                    and path not in seen:
                seen.add(path)
                queue.append(path)
    assert not outside, outside[:10]
    assert {"page-search", "page-results", "page-item", "page-item_sub", "page-done"} <= kinds
    placeholder = f"/shop-site/small%20run{PLACEHOLDER}"
    assert images == {placeholder} and placeholder in seen
    r = viewer.get(placeholder)
    assert r.status_code == 200 and r.mimetype == "image/svg+xml" and b"<svg" in r.data
    # ... where the shop itself, for the same states, shows its catalog's images from the CDN.
    served = shop_app(shop, api=False).test_client()
    cdn = {img["src"] for state in states
           for img in BeautifulSoup(_served(served, replace(state, visited=frozenset())),
                                    "html.parser").find_all("img")}
    assert cdn and all(_off_this_machine(src, "/") for src in cdn)


@pytest.mark.parametrize(("src", "outside"), [
    ("https://m.media-amazon.com/images/I/41hLcmgNbqL.jpg", True),
    ("HTTP://cdn.example/x.jpg", True),
    ("//cdn.example/x.jpg", True),           # protocol-relative
    ("\\\\cdn.example/x.jpg", True),         # browsers read a backslash as a slash
    ("/\\cdn.example/x.jpg", True),
    (" \thttps://cdn.example/x.jpg", True),  # leading space, a tab inside
    ("ht\ttps://cdn.example/x.jpg", True),
    ("&#104;ttps://cdn.example/x.jpg", True),  # as written in the attribute: escaped
    ("/shop-site/r/static/placeholder.svg", False),
    ("static/x.svg", False),
    ("data:image/svg+xml,%3Csvg%2F%3E", False),
])
def test_images_from_another_host_become_the_placeholder(src, outside):
    from gagpo.viewer.shop import local_images, off_site

    assert off_site(src) is outside
    page = f'<ul><img src="{src}" class="result-img" alt="" data-fallback="/r/static/x"></ul>'
    shown = local_images(page, "/r")
    want = "/r/static/placeholder.svg" if outside else src
    assert shown == page.replace(f'src="{src}"', f'src="{want}"')


# -- which rollout's page, and a step that is not there -------------------------------------


def _other_goal_rollout(shop: Shop, goal: int) -> tuple[list[StepRow], list[str], list[State]]:
    """A few steps of another goal's episode, as rollout 1 records them: (rows, the agent's
    HTML pages, the states at each step and after the last)."""
    other = next(i for i in range(len(shop.goals)) if i != goal
                 and shop.catalog.get(shop.goals[i].asin) is not None)
    actions = _script(shop, other)[:6]
    env = WebShopEnv(observation_mode="html", num_products=N_PRODUCTS, max_steps=100)
    try:
        obs, info = env.reset(options={"task": other})
        rows, pages, states = [], [obs], [shop.initial_state(other)]
        for t, a in enumerate(actions):
            rows.append(StepRow(1, 1, t, info["task_id"], info["task_type"], info["state_key"],
                                obs, None, a, a, True, True, 0.0, False, False, False, 0.0))
            obs, _, _, _, info = env.step(a)
            pages.append(obs)
            states.append(shop.step(states[-1], a).state)
    finally:
        env.close()
    return rows, pages, states


def test_each_rollouts_step_links_open_that_rollouts_pages(shop, episode, tmp_path):
    """Two rollouts of different goals in one iteration, their rows interleaved as the
    rollout writes them: rollout 1's page of step t is the page its agent saw at t (its goal,
    its actions), and rollout 0's pages are still its own."""
    goal, actions, rows, pages, states = episode
    other_rows, other_pages, other_states = _other_goal_rollout(shop, goal)
    assert other_rows[0].task_id != rows[0].task_id
    both = sorted(rows + other_rows, key=lambda r: (r.t, r.trajectory))
    run = tmp_path / "two"
    (run / "steps").mkdir(parents=True)
    write_json(run / "config.json", {"env": "WebShop-v0",
                                     "env_kwargs": {"num_products": N_PRODUCTS}})
    n = len(both)
    save_step_table(run / "steps" / "iter_00001.npz", StepTable(both, 2, 1),
                    {"advantage": np.zeros(n, np.float32), "value": np.zeros(n, np.float32)},
                    True)
    viewer = create_app([run]).test_client()
    shown = 0
    for traj, seen, reached in ((1, other_pages, other_states), (0, pages, states)):
        for t in range(len(other_rows) + 1):
            r = viewer.get(f"/shop/two/1/{traj}/{t}")
            assert r.status_code == 200, (traj, t, r.data[:300])
            mine = r.get_data(as_text=True)
            assert _unmounted(mine, "/shop-site/two") == _placeholders(seen[t]), (traj, t)
            assert seen[t] == render_html(shop, reached[t])
            images = [img["src"] for img in BeautifulSoup(mine, "html.parser").find_all("img")]
            assert not [u for u in images if _off_this_machine(u, "/shop/two/")], (traj, t)
            shown += len(images)
    assert shown and other_pages[0] != pages[0]  # images shown; two goals: two first pages


def test_a_step_that_is_not_there_is_a_404_that_says_so(shop, episode, tmp_path):
    """A link to a rollout, iteration, episode or step the run does not hold (a stale link,
    a hand-typed URL), or to a step the run did not record: a page that says so with 404,
    never a server error."""
    goal, actions, rows, pages, states = episode
    last = len(actions)
    c = create_app([_train_run(tmp_path / "r", rows, {"num_products": N_PRODUCTS}),
                    _eval_run(tmp_path / "ev", rows, {"env": "WebShop-v0",
                                                      "env_kwargs": {"num_products":
                                                                     N_PRODUCTS}})]
                   ).test_client()
    assert c.get(f"/shop/r/1/0/{last}").status_code == 200  # the page after the last step
    _problem(c, "/shop/r/1/7/0", 404, "no rollout 7")
    _problem(c, "/shop/r/9/0/0", 404, "no iteration 9")
    _problem(c, f"/shop/r/1/0/{last + 1}", 404, f"no step {last + 1}")
    _problem(c, "/shop/r/1/0/-1", 404, "Not Found")  # not a step number at all
    _problem(c, "/shop-eval/ev/99/0", 404, "no episode 99")
    _problem(c, f"/shop-eval/ev/5/{last + 1}", 404, f"no step {last + 1}")
    # A rollout with a step missing from its record: its later steps cannot be replayed.
    gap = [r for r in rows if r.t != 3]
    c = create_app([_train_run(tmp_path / "gap", gap, {"num_products": N_PRODUCTS})]
                   ).test_client()
    _problem(c, "/shop/gap/1/0/5", 404, "recorded only some")

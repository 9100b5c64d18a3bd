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
    ("DATA:image/png;base64,iVBORw0KGgo=", False),
    ("javascript:alert(1)", True),          # a scheme other than data: loads nothing local
    ("JavaScript&#58;alert(1)", True),
    ("blob:https://cdn.example/1", True),
    ("/\t/cdn.example/x.jpg", True),         # the tab dropped: //cdn.example
    ("/\n/cdn.example/x.jpg", True),
    ("\x01\x1f//cdn.example/x.jpg", True),   # leading control characters stripped
    ("\xa0//cdn.example/x.jpg", False),      # a no-break space is no space to strip: a path
    ("../static/x.svg", False),
    ("?page=2", False),
    ("#top", False),
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


# -- what each page that shows no shop says, word for word ---------------------------------

ASK_SHOP = ("or open the run's steps on a shop serving its catalog and goals: gagpo serve "
            "webshop, then gagpo view --shop URL")


def _bare_rows(task_id: str = "webshop:0", n: int = 2) -> list[StepRow]:
    """``n`` steps of a rollout of ``task_id`` that recorded no state keys or observations
    (nothing for the replay to check): enough for the pages that show no shop."""
    return [StepRow(0, 0, t, task_id, "", "", "", None, "", "search[shoe]", True, True, 0.0,
                    False, False, False, 0.0) for t in range(n)]


def _said(client, url: str, status: int) -> tuple[str, str]:
    """The title and the sentence of the page ``url`` answers with ``status``."""
    soup = BeautifulSoup(_problem(client, url, status), "html.parser")
    title = soup.h1.get_text()
    assert soup.title.get_text() == f"{title} - gagpo view"
    return title, soup.find(id="error").get_text()


def test_a_served_shop_page_names_the_shop_and_where_the_run_recorded_it(tmp_path):
    url = "http://10.0.0.7:3000"
    train = _train_run(tmp_path / "srv", _bare_rows(), {"server_url": url})
    ev = _eval_run(tmp_path / "ev", _bare_rows(), {"env_kwargs": {"server_url": url}})
    c = create_app([train, ev]).test_client()
    for page, origin in (("/shop/srv/1/0/1", "config.json's env_kwargs"),
                         ("/shop-eval/ev/5/1", "summary.json's env_kwargs")):
        assert _said(c, page, 404) == (
            "Played on a served shop",
            f"This run played on the shop served at {url} ({origin}), whose catalog and goals "
            f"the run does not record. Open its steps on that shop: gagpo view --shop {url}")


def test_an_evaluation_whose_summary_names_no_shop_says_which_kind_it_played_on(tmp_path):
    """An evaluation's summary.json that records no env_kwargs, only the env's label: a served
    shop, or a catalog folder it does not name."""
    served = _eval_run(tmp_path / "served", _bare_rows(),
                       {"env": "WebShop-v0", "label": "WebShop (served shop)"})
    folder = _eval_run(tmp_path / "folder", _bare_rows(), {"env": "WebShop-v0",
                                                           "label": "WebShop"})
    c = create_app([served, folder]).test_client()
    assert _said(c, "/shop-eval/served/5/0", 404) == (
        "Played on a served shop",
        "This evaluation played on a shop served over HTTP, whose catalog and goals its "
        "summary.json does not record. Open its steps on that shop: gagpo view --shop URL.")
    assert _said(c, "/shop-eval/folder/5/0", 404) == (
        "Catalog folder not recorded",
        "This evaluation played on a folder of WebShop data files that its summary.json does "
        f"not name, so the viewer cannot open its shop; {ASK_SHOP}.")


@pytest.mark.parametrize("kwargs", [
    {"catalog": 123},
    {"catalog": ["webshop-data"], "goals": "synthetic"},
    {"goals": "expert"},
    {"goals": None, "num_products": 50},
    {"num_products": 0},
    {"num_products": -3},
    {"num_products": "200"},
    {"num_products": True},
    {"num_products": 2.5},
])
def test_settings_the_env_does_not_take_get_a_page_that_names_them(kwargs, tmp_path):
    c = create_app([_train_run(tmp_path / "odd", _bare_rows(), kwargs)]).test_client()
    catalog, goals = kwargs.get("catalog"), kwargs.get("goals", "human")
    n = kwargs.get("num_products")
    assert _said(c, "/shop/odd/1/0/0", 404) == (
        "Unknown shop settings",
        f"The run's shop settings (config.json's env_kwargs: catalog={catalog!r}, "
        f"goals={goals!r}, num_products={n!r}) are not ones WebShop-v0 takes, so the viewer "
        "cannot open its shop.")


@pytest.mark.parametrize("env_kwargs", [{"num_products": 1}, None, [], "num_products=5"])
def test_a_one_product_shop_and_a_config_without_env_kwargs_open(env_kwargs, tmp_path):
    """The least product count WebShop-v0 takes is 1; a config.json whose env_kwargs are null
    or not a mapping played on the defaults."""
    run = tmp_path / "r"
    _train_run(run, _bare_rows(), {})
    write_json(run / "config.json", {"env": "WebShop-v0", "env_kwargs": env_kwargs})
    c = create_app([run]).test_client()
    for t in (0, 1, 2):
        r = c.get(f"/shop/r/1/0/{t}")
        assert r.status_code == 200, (t, r.data[:500])
    shop = open_shop(num_products=1 if env_kwargs == {"num_products": 1} else None)
    state = shop.initial_state(0)
    for action in ("search[shoe]", "search[shoe]"):
        state = shop.step(state, action).state
    assert _unmounted(r.get_data(as_text=True), "/shop-site/r") == \
        _placeholders(render_html(shop, state))


DEFAULT_SHOP = "the embedded generated catalog (1000 products), human goals"


@pytest.mark.parametrize(("kind", "written", "opened", "what", "origin"), [
    ("train", None, {}, DEFAULT_SHOP, "the defaults (the run folder has no config.json)"),
    ("train", {}, {}, DEFAULT_SHOP, "config.json's env_kwargs"),
    ("train", {"num_products": N_PRODUCTS, "goals": "synthetic"},
     {"num_products": N_PRODUCTS, "goals": "synthetic"},
     f"the embedded generated catalog ({N_PRODUCTS} products), synthetic goals",
     "config.json's env_kwargs"),
    ("eval", None, {}, DEFAULT_SHOP, "the defaults (this evaluation has no summary.json yet)"),
    ("eval", {"label": "WebShop (embedded generated catalog)"}, {}, DEFAULT_SHOP,
     "summary.json (the embedded generated catalog; it records no goals or product count: "
     "the defaults)"),
    ("eval", {"env_kwargs": {"num_products": N_PRODUCTS}}, {"num_products": N_PRODUCTS},
     f"the embedded generated catalog ({N_PRODUCTS} products), human goals",
     "summary.json's env_kwargs"),
], ids=["train-no-config", "train-empty-env-kwargs", "train-env-kwargs", "eval-no-summary",
        "eval-label-only", "eval-env-kwargs"])
def test_a_goal_the_shop_does_not_have_names_the_shop_and_where_it_was_read(
        kind, written, opened, what, origin, tmp_path):
    """The run played a goal past the shop's last: the page says which shop the viewer opened
    (catalog, size, goals) and where it read that, so that the user can tell why."""
    last = len(open_shop(**opened).goals)  # one past the shop's last goal
    rows = _bare_rows(f"webshop:{last}")
    if kind == "train":
        c = create_app([_train_run(tmp_path / "r", rows, written)]).test_client()
        url = "/shop/r/1/0/0"
    else:
        c = create_app([_eval_run(tmp_path / "r", rows, written)]).test_client()
        url = "/shop-eval/r/5/0"
    assert _said(c, url, 409) == (
        "The run's shop differs",
        f"This shop ({what}, read from {origin}) does not reproduce the run: it has {last} "
        f"goals, and the run played goal {last}.")


def test_a_catalog_folder_that_is_not_there_gets_a_page_naming_the_folder_looked_at(
        tmp_path, monkeypatch):
    """A relative catalog path is read from the viewer's working directory: the page names
    the folder it looked at, and the files to put there."""
    monkeypatch.chdir(tmp_path)
    c = create_app([_train_run(tmp_path / "rel", _bare_rows(), {"catalog": "webshop-data"})]
                   ).test_client()
    assert _said(c, "/shop/rel/1/0/0", 404) == (
        "The run's catalog is missing",
        "The run played on the WebShop data files in webshop-data (config.json's env_kwargs), "
        f"and {tmp_path / 'webshop-data'} is not a folder on this machine (a relative path is "
        "read from the viewer's working directory). Put the original items_shuffle*.json, "
        f"items_ins_v2*.json and items_human_ins.json there, {ASK_SHOP}.")


@pytest.mark.parametrize(("goals", "present", "missing"), [
    ("human", [], "items_shuffle*.json and no items_human_ins*.json"),
    ("synthetic", [], "items_shuffle*.json and no items_ins_v2*.json"),
    ("human", ["items_shuffle_1000.json", "items_ins_v2_1000.json"], "items_human_ins*.json"),
    ("synthetic", ["items_shuffle.json", "items_human_ins.json"], "items_ins_v2*.json"),
    ("human", ["items_human_ins.json", "items_ins_v2.json"], "items_shuffle*.json"),
], ids=["human-empty", "synthetic-empty", "human-no-human-ins", "synthetic-no-ins-v2",
        "no-shuffle"])
def test_a_catalog_folder_without_the_files_its_goals_need_names_those_files(
        goals, present, missing, tmp_path):
    """Human goals need items_human_ins*.json, synthetic goals items_ins_v2*.json, both the
    items_shuffle*.json products."""
    folder = tmp_path / "webshop-data"
    folder.mkdir()
    for name in present:
        (folder / name).write_text("{}")
    kwargs = {"catalog": str(folder), "goals": goals}
    c = create_app([_train_run(tmp_path / "r", _bare_rows(), kwargs)]).test_client()
    assert _said(c, "/shop/r/1/0/0", 404) == (
        "The run's catalog files are missing",
        f"The run played on the WebShop data files in {folder} (config.json's env_kwargs), and "
        f"that folder holds no {missing}. Put the original files there, {ASK_SHOP}.")


@pytest.mark.parametrize(("kwargs", "what"), [
    ({}, ", human goals"),
    ({"num_products": 50}, " (first 50 products), human goals"),
    ({"goals": "synthetic", "num_products": 7}, " (first 7 products), synthetic goals"),
], ids=["all-products", "first-50", "synthetic-first-7"])
def test_catalog_files_that_cannot_be_read_get_a_page_naming_the_shop_and_the_error(
        kwargs, what, tmp_path):
    folder = tmp_path / "webshop-data"
    folder.mkdir()
    for name in ("items_shuffle_1000.json", "items_ins_v2_1000.json", "items_human_ins.json"):
        (folder / name).write_text("{}")  # not the original's lists
    c = create_app([_train_run(tmp_path / "r", _bare_rows(), {"catalog": str(folder), **kwargs})]
                   ).test_client()
    title, message = _said(c, "/shop/r/1/0/0", 404)
    assert title == "The run's shop cannot be opened"
    head = (f"The run played on the WebShop data files in {folder}{what} (config.json's "
            "env_kwargs). Opening it here failed: ")
    tail = f". Fix or restore those files, {ASK_SHOP}."
    assert message.startswith(head) and message.endswith(tail), message
    goals = kwargs.get("goals", "human")  # the loader's own error, its type named
    said = message[len(head):-len(tail)]
    assert said == f"ValueError: the catalog at {folder} has no {goals} goals", message


def test_a_shop_problem_reads_as_its_message(tmp_path):
    """Where the viewer's code meets a shop problem outside a page (a log, a traceback), it
    reads as the page's sentence."""
    from gagpo.viewer.data import Run
    from gagpo.viewer.shop import ShopProblem, run_shop

    path = _train_run(tmp_path / "gone", _bare_rows(), {"catalog": str(tmp_path / "nowhere")})
    with pytest.raises(ShopProblem) as caught:
        run_shop(Run("gone", path, "train"))
    problem = caught.value
    assert (problem.status, problem.title) == (404, "The run's catalog is missing")
    assert str(problem) == problem.message
    assert problem.message.startswith(f"The run played on the WebShop data files in "
                                      f"{tmp_path / 'nowhere'} (config.json's env_kwargs), and ")


def test_a_replay_that_differs_from_the_record_says_where_word_for_word(shop, episode, tmp_path):
    """Other goals than the run's (the recorded observation shows another instruction), a
    state key the replay does not reach, a step missing from the record."""
    goal, actions, rows, pages, states = episode
    c = create_app([
        _train_run(tmp_path / "syn", rows, {"num_products": N_PRODUCTS, "goals": "synthetic"}),
        _train_run(tmp_path / "key", [replace(r, state_key="0123456789ab") if r.t == 4 else r
                                      for r in rows], {"num_products": N_PRODUCTS}),
        _train_run(tmp_path / "gap", [r for r in rows if r.t != 3],
                   {"num_products": N_PRODUCTS}),
    ]).test_client()
    synthetic = open_shop(num_products=N_PRODUCTS, goals="synthetic")
    instruction = synthetic.goals[goal].instruction_text.strip()
    assert instruction not in rows[0].observation
    assert _said(c, "/shop/syn/1/0/2", 409) == (
        "The run's shop differs",
        f"This shop (the embedded generated catalog ({N_PRODUCTS} products), synthetic goals, "
        f"read from config.json's env_kwargs) does not reproduce the run: goal {goal}'s "
        f"instruction here is {instruction!r}, which the run's recorded observations do not "
        "show.")
    for t in (4, 5, len(actions)):
        assert _said(c, f"/shop/key/1/0/{t}", 409) == (
            "The run's shop differs",
            f"This shop (the embedded generated catalog ({N_PRODUCTS} products), human goals, "
            "read from config.json's env_kwargs) does not reproduce the run: replaying the "
            "rollout's actions reaches, before step 4, another state than the run recorded "
            "(other catalog files, goals or product count, or a gagpo whose state keys differ "
            "from the one that recorded the run).")
    for t in (0, 3):
        assert c.get(f"/shop/key/1/0/{t}").status_code == 200
    for t in (4, 5):
        assert _said(c, f"/shop/gap/1/0/{t}", 404) == (
            "No such step",
            f"The rollout has no step {t} (or the run recorded only some of its steps).")


def test_a_run_that_recorded_no_observations_still_opens_its_steps(shop, episode, tmp_path):
    """An evaluation written without observations (null) or a step table with them empty:
    the state keys alone check the replay, and each step's page is the one the agent saw."""
    goal, actions, rows, pages, states = episode
    ev = _eval_run(tmp_path / "ev", [replace(r, observation=None) for r in rows],
                   {"env_kwargs": {"num_products": N_PRODUCTS}})
    train = _train_run(tmp_path / "tr", [replace(r, observation="") for r in rows],
                       {"num_products": N_PRODUCTS})
    c = create_app([ev, train]).test_client()
    for t in (0, 6, len(actions)):
        for url, root in ((f"/shop-eval/ev/5/{t}", "/shop-site/ev"),
                          (f"/shop/tr/1/0/{t}", "/shop-site/tr")):
            r = c.get(url)
            assert r.status_code == 200, (url, r.data[:300])
            assert _unmounted(r.get_data(as_text=True), root) == _placeholders(pages[t])


def test_replay_reaches_each_recorded_steps_state_and_no_step_past_the_end(shop, episode):
    """Step t's state is the one action t was taken in; one past the last step, the state the
    episode ended in; any other t, and a record with a step missing, is no step."""
    from gagpo.viewer.shop import Recorded, ShopProblem, ShopSource, replay

    goal, actions, rows, pages, states = episode
    source = ShopSource(num_products=N_PRODUCTS, origin="the test")
    steps = [Recorded(r.t, r.action, r.state_key, r.observation) for r in reversed(rows)]
    for t in range(len(actions) + 1):
        assert replay(shop, source, rows[0].task_id, steps, t) == states[t], t
    for t, kept in ((-1, steps), (len(actions) + 1, steps), (2, steps[:-1])):
        with pytest.raises(ShopProblem) as caught:
            replay(shop, source, rows[0].task_id, kept, t)
        assert (caught.value.status, caught.value.title, caught.value.message) == (
            404, "No such step",
            f"The rollout has no step {t} (or the run recorded only some of its steps).")


@pytest.mark.parametrize("task_id", ["alfworld:3", "webshop:", "webshop:-1", "webshop:1a",
                                     "webshop: 1", "WebShop:1", "webshop:" + "9" * 13, "1"])
def test_a_step_of_another_task_than_a_webshop_goal_is_a_404_that_says_so(task_id, tmp_path):
    from gagpo.viewer.shop import ShopProblem, goal_of_task

    with pytest.raises(ShopProblem) as caught:
        goal_of_task(task_id)
    said = (404, "Not a WebShop step", f"Task {task_id!r} is not a WebShop goal.")
    assert (caught.value.status, caught.value.title, caught.value.message) == said
    c = create_app([_train_run(tmp_path / "r", _bare_rows(task_id), {})]).test_client()
    assert _said(c, "/shop/r/1/0/0", 404) == said[1:]


def test_goal_of_task_reads_a_webshop_task_ids_goal():
    from gagpo.viewer.shop import goal_of_task

    assert [goal_of_task(t) for t in ("webshop:0", "webshop:7", "webshop:1983",
                                      "webshop:" + "9" * 12)] == [0, 7, 1983, 999999999999]


def test_runs_on_one_shop_share_one_mounted_site_that_has_no_json_api(shop, tmp_path):
    """The shop's pages are mounted once per shop (catalog, goals, size), whichever run and
    file the settings came from; the mount serves pages only: no session API, no token."""
    from gagpo.viewer.shop import ShopSource, site

    mounted = site(ShopSource(num_products=N_PRODUCTS, origin="config.json's env_kwargs"), shop)
    assert site(ShopSource(num_products=N_PRODUCTS, origin="summary.json"), shop) is mounted
    c = create_app([_train_run(tmp_path / "r", _bare_rows(), {"num_products": N_PRODUCTS})]
                   ).test_client()
    assert c.get("/shop-site/r/api/v1/info").status_code == 404
    assert c.post("/shop-site/r/api/v1/sessions", json={"goal": 0}).status_code == 404
    assert c.get("/shop-site/r/fixed_0").status_code == 200  # the pages are there

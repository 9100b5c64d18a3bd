"""Clients written for the original WebShop site read our served pages unchanged.

Two kinds of client exist: ReAct's WebShop agent fetches the original's URLs and reads the
page's visible text nodes in order (BeautifulSoup's ``find_all(string=True)`` minus those under
head, script, style, title and meta), taking the node right after the score label as the score;
WebShop's own browser env reads the ``<pre>`` inside the element with id ``reward``. The
reader below does what they do (written here, not taken from them), and every page kind is
compared node for node with what the original's templates put on the page for the same data.
Those expected sequences are written out by hand from the templates' structure, not from our
page model, so the two renderings check each other.

Differences from the original kept on purpose (the README lists them): the done page has no
MTurk code block (the original's "Your code: ", the code, " (Paste it in your MTurk
interface.)" after the thank-you line); a value repeated in one option group is listed once;
blank bullet points are left out (their text nodes are whitespace only).
"""

from __future__ import annotations

import json
import pprint
from urllib.parse import quote

import pytest
from bs4 import BeautifulSoup
from shop_pages import visible_nodes

from gagpo.servers.webshop.reward import compute_reward
from gagpo.servers.webshop.shop import Shop

SCORE_LABEL = "Your score (min 0.0, max 1.0)"


# ------------------------------------------------------------- the clients' way of reading


def nodes(html: str) -> list[str]:
    """The visible nodes that are not whitespace only, as exact strings."""
    return [str(t) for t in visible_nodes(html) if str(t).strip()]


def react_score(html: str) -> float:
    """ReAct's reading: the visible node right after the label, as a float."""
    texts = visible_nodes(html)
    return float(texts[texts.index(SCORE_LABEL) + 1])


def browser_env_score(html: str) -> float:
    """WebShop's browser env's reading: the first <pre> inside #reward, as a float."""
    tag = BeautifulSoup(html, "html.parser").find(id="reward")
    return float(tag.find_all("pre")[0].string) if tag is not None else 0.0


# ------------------------------------------- what the original's templates show, by hand


def header(shop: Shop, g: int) -> list[str]:
    return ["Instruction:", shop.goals[g].instruction_text]


def expected_start(shop: Shop, g: int) -> list[str]:
    # search_page.html: logo, "Instruction: " (its only label with a trailing space), the
    # instruction after a <br>, the search button.
    return ["WebShop", "Instruction: ", shop.goals[g].instruction_text, "Search"]


def expected_results(shop: Shop, g: int, query: str, page: int) -> list[str]:
    # results_page.html: header, Back to Search, the page heading, < Prev only past page 1,
    # Next > always, then ASIN / title / price of the page's slice of the top 50.
    hits = shop.results(tuple(query.split(" ")))
    out = [*header(shop, g), "Back to Search", f"Page {page} (Total results: {len(hits)})"]
    if page > 1:
        out.append("< Prev")
    out.append("Next >")
    shown = hits[(page - 1) * 10: page * 10] if page >= 1 else []
    for i in shown:
        p = shop.catalog.products[i]
        out += [p.asin, p.title, p.price_tag]
    return out


def expected_item(shop: Shop, g: int, asin: str) -> list[str]:
    # item_page.html: header, Back to Search, < Prev, each option group's name and values,
    # title, price, rating, the three sub-page buttons (no Attributes button by default), Buy.
    p = shop.catalog.get(asin)
    out = [*header(shop, g), "Back to Search", "< Prev"]
    for group, values in p.options.items():
        out += [group, *dict.fromkeys(values)]
    out += [p.title, f"Price: {p.price_tag}", "Rating: N.A.", "Description", "Features",
            "Reviews", "Buy Now"]
    return out


def expected_sub(shop: Shop, g: int, asin: str, sub: str) -> list[str]:
    # *_page.html: header, Back to Search, < Prev, then the sub-page's own text. Features and
    # Attributes print each entry after a space: " {{ bullet }}".
    p = shop.catalog.get(asin)
    out = [*header(shop, g), "Back to Search", "< Prev"]
    if sub == "Description":
        out.append(p.description)
    elif sub == "Features":
        out += [f" {b}" for b in p.bullet_points]
    elif sub == "Attributes":
        out += [f" {a}" for a in p.attributes]
        out += [p.category, p.query, p.product_category]
    return [t for t in out if t.strip()]


def expected_done(shop: Shop, g: int, asin: str, options: dict[str, str]) -> list[str]:
    # done_page.html, without its MTurk code block: the purchase, the target, the goal dump,
    # the score right after its label, the reward details dump.
    p = shop.catalog.get(asin)
    goal = shop.goals[g]
    parts = compute_reward(p, goal, options)
    human = not isinstance(goal.goal_options, dict)
    goal_options = list(goal.goal_options) if human else dict(goal.goal_options)
    price_upper = 1000000 if goal.price_upper == 1e6 else goal.price_upper
    goal_dict = {
        "asin": goal.asin, "category": goal.category, "query": goal.query, "name": goal.name,
        "product_category": goal.product_category, "instruction_text": goal.instruction_text,
        "attributes": list(goal.attributes), "price_upper": price_upper,
        "goal_options": goal_options, "weight": 1 if human else goal.weight,
    }
    n = len(goal.attributes) + len(goal.goal_options) + 1
    info = {"r_type": parts.r_type, "r_att": parts.r_att, "w_att": len(goal.attributes) / n,
            "query_match": parts.query_match, "category_match": parts.category_match,
            "title_score": parts.title_score}
    if parts.r_option is not None:
        info |= {"r_option": parts.r_option, "w_option": len(goal.goal_options) / n}
    if parts.r_price is not None:
        info |= {"r_price": parts.r_price, "w_price": 1 / n}
    # Flask's tojson: sorted keys, ASCII, HTML-special characters as \u escapes.
    chosen = json.dumps(options, sort_keys=True)
    for ch in "<>&'":
        chosen = chosen.replace(ch, f"\\u{ord(ch):04x}")
    out = [
        "Thank you for shopping with us!",
        "Purchased", "asin", asin, "options", chosen, "attrs", str(list(p.attributes)),
        "category", p.category, "query", p.query, "product category", p.product_category,
        "Target", "asin", goal.asin, "options", str(goal_options),
        "attrs", str(list(goal.attributes)), "price upper", str(price_upper),
        "instuction text", goal.instruction_text, "category", goal.category,
        "product category", goal.product_category, "query", goal.query,
        "Goal ", pprint.pformat(goal_dict),
        "Reward", SCORE_LABEL, str(parts.reward),
        "Reward Details ", pprint.pformat(info),
    ]
    return [t for t in out if t.strip()]


# -------------------------------------------------------------------------------- helpers


def seg(x: object) -> str:
    """One URL path segment, as an HTTP client percent-encodes what a client puts there."""
    return quote(str(x), safe="")


def get(client, *parts: object) -> str:
    r = client.get("/" + "/".join(seg(p) for p in parts))
    assert r.status_code == 200, (parts, r.status_code, r.get_data(as_text=True)[:300])
    return r.get_data(as_text=True)


def goal_with_options(shop: Shop) -> int:
    return next(i for i, g in enumerate(shop.goals) if shop.catalog.get(g.asin).options)


def product_without_options(shop: Shop) -> str:
    return next(p.asin for p in shop.catalog.products if not p.options)


# ---------------------------------------------------------------------------------- pages


def test_start_page(catalog_shop, catalog_client):
    for g in (0, 1, len(catalog_shop.goals) - 1):
        assert nodes(get(catalog_client, f"fixed_{g}")) == expected_start(catalog_shop, g)


@pytest.mark.parametrize("page", [0, 1, 2, 6])
def test_results_pages(catalog_shop, catalog_client, page):
    """Pages 1 and 2, page 0 (the original shows no products there, and Next > leads to
    page 1) and a page past the last; keywords as ReAct sends them (the raw query) and as
    the pages' own links send them (a list literal)."""
    g = 0
    # A '/' would split the URL segment (for the original as well).
    query = catalog_shop.catalog.get(catalog_shop.goals[g].asin).title.lower().replace("/", " ")
    expected = expected_results(catalog_shop, g, query, page)
    assert nodes(get(catalog_client, "search_results", f"fixed_{g}", query, page)) == expected
    literal = str(query.split(" "))
    assert nodes(get(catalog_client, "search_results", f"fixed_{g}", literal, page)) == expected


def test_page_zero_links_to_page_one(catalog_client):
    html = get(catalog_client, "search_results", "fixed_0", "red", 0)
    soup = BeautifulSoup(html, "html.parser")
    assert [b.get_text() for b in soup.find_all("button")] == ["Back to Search", "Next >"]
    action = soup.find("button", string="Next >").find_parent("form")["action"]
    assert action.endswith("/1")


def test_item_pages(catalog_shop, catalog_client):
    g = goal_with_options(catalog_shop)
    asin = catalog_shop.goals[g].asin
    group, values = next(iter(catalog_shop.catalog.get(asin).options.items()))
    bare = product_without_options(catalog_shop)
    cases = [
        (asin, {}),
        (asin, {group: values[-1]}),
        (asin, {group: "no such value"}),       # a value the product does not offer
        (asin, {"no such group": "x"}),         # a group it does not have
        (bare, {}),
        (bare, {group: values[0]}),             # what ReAct sends after a product with options
    ]
    for a, options in cases:
        html = get(catalog_client, "item_page", f"fixed_{g}", a, "some query", 1, options)
        assert nodes(html) == expected_item(catalog_shop, g, a), (a, options)


@pytest.mark.parametrize("sub", ["Description", "Features", "Reviews", "Attributes"])
def test_sub_pages(catalog_shop, catalog_client, sub):
    g = goal_with_options(catalog_shop)
    asin = catalog_shop.goals[g].asin
    for options in ({}, {"size": "no such size"}):
        html = get(catalog_client, "item_sub_page", f"fixed_{g}", asin, "q", 1, sub, options)
        assert nodes(html) == expected_sub(catalog_shop, g, asin, sub)


def test_done_pages(catalog_shop, catalog_client):
    """The done page node for node, and the score both clients read, for the goal product
    with its goal's options, with none, and with options it does not offer (the original
    scores the chosen values whatever they are)."""
    g = goal_with_options(catalog_shop)
    goal = catalog_shop.goals[g]
    asin = goal.asin
    group, values = next(iter(catalog_shop.catalog.get(asin).options.items()))
    wanted = (list(goal.goal_options.values()) if isinstance(goal.goal_options, dict)
              else list(goal.goal_options))
    cases = [
        (asin, {}),
        (asin, {group: values[0]}),
        (asin, {f"group{i}": v for i, v in enumerate(wanted)}),
        (product_without_options(catalog_shop), {group: values[-1]}),
    ]
    for a, options in cases:
        html = get(catalog_client, "done", f"fixed_{g}", a, options)
        assert nodes(html) == expected_done(catalog_shop, g, a, options), (a, options)
        reward = compute_reward(catalog_shop.catalog.get(a), goal, options).reward
        assert react_score(html) == reward
        assert browser_env_score(html) == reward


def test_score_node_follows_its_label_directly(catalog_client, catalog_shop):
    """ReAct indexes the raw node list: not even a whitespace node may sit in between."""
    html = get(catalog_client, "done", "fixed_0", catalog_shop.goals[0].asin, {})
    texts = [str(t) for t in visible_nodes(html)]
    after = texts[texts.index(SCORE_LABEL) + 1]
    assert after.strip() == after and float(after) >= 0.0


# ------------------------------------------------------------------------------- statuses


def test_urls_the_original_serves_are_served(catalog_shop, catalog_client):
    asin = catalog_shop.catalog.products[0].asin
    for parts in [
        ("item_sub_page", "fixed_0", asin, "q", 1, "Attributes", {}),
        ("item_page", "fixed_0", asin, "q", 1, {"no such group": "x"}),
        ("item_sub_page", "fixed_0", asin, "q", 1, "Reviews", {"a": "b"}),
        ("done", "fixed_0", asin, {"no such group": "x"}),
        ("search_results", "fixed_0", "q", 0),
    ]:
        get(catalog_client, *parts)


def test_what_the_original_fails_on_is_a_clear_4xx(catalog_shop, catalog_client):
    """The original answers 500 for these; ours say what is wrong."""
    asin = catalog_shop.catalog.products[0].asin
    for parts, status in [
        (("item_page", "fixed_0", "NOSUCHASIN", "q", 1, {}), 404),
        (("done", "fixed_0", "NOSUCHASIN", {}), 404),
        (("item_sub_page", "fixed_0", asin, "q", 1, "Secrets", {}), 404),
        (("item_sub_page", "fixed_0", asin, "q", 1, "Buy Now", {}), 404),
        (("search_results", "fixed_0", "q", -1), 400),
        (("item_page", "fixed_0", asin, "q", 1, {"size": 1}), 400),
        (("item_page", "fixed_0", asin, "q", 1, "{'size': '\\ud800'}"), 400),
        (("done", "fixed_0", asin, "['not', 'a', 'dict']"), 400),
    ]:
        r = catalog_client.get("/" + "/".join(seg(p) for p in parts))
        assert r.status_code == status, (parts, r.status_code)
        assert r.mimetype == "text/html"


# ---------------------------------------------------------------- a ReAct-style episode


class ReactStyleClient:
    """Keeps the page state as ReAct's WebShop client does (page type, query, ASIN, options)
    and fetches the original's URLs for it: the raw query as the keywords segment, Python's
    ``str(dict)`` as the options segment. Option groups are remembered from the last item
    page that showed any, so an option clicked on a product without options is sent with a
    group that product lacks, as that client does."""

    def __init__(self, client, session: str) -> None:
        self.client, self.session = client, session
        self.page, self.query, self.asin, self.sub = "init", "", "", ""
        self.options: dict[str, str] = {}
        self.option_group: dict[str, str] = {}
        self.html = self.fetch()

    def fetch(self) -> str:
        s = self.session
        url = {
            "init": [s],
            "search": ["search_results", s, self.query, 1],
            "item": ["item_page", s, self.asin, self.query, 1, self.options],
            "item_sub": ["item_sub_page", s, self.asin, self.query, 1, self.sub, self.options],
            "end": ["done", s, self.asin, self.options],
        }[self.page]
        html = get(self.client, *url)
        # The option groups of this page: a label's group is the last plain text before it.
        group = ""
        for t in visible_nodes(html):
            if not str(t).strip():
                continue
            if t.parent.name == "label":
                self.option_group[str(t)] = group
            elif t.parent.name != "button" and t.parent.get("class") != ["product-link"]:
                group = str(t)
        return html

    def step(self, action: str) -> str:
        arg = action[action.index("[") + 1: -1]
        if action.startswith("search["):
            self.page, self.query = "search", arg
        elif arg == "Buy Now":
            self.page = "end"
        elif arg == "< Prev":
            self.page = "item" if self.page == "item_sub" else "search"
            if self.page == "search":
                self.options = {}
        elif arg in ("Description", "Features", "Reviews", "Attributes"):
            self.page, self.sub = "item_sub", arg
        elif self.page == "search":
            self.page, self.asin = "item", arg
        else:
            self.options[self.option_group[arg]] = arg
        self.html = self.fetch()
        return self.html


def test_react_style_episode(catalog_shop, catalog_client):
    g = goal_with_options(catalog_shop)
    goal = catalog_shop.goals[g]
    product = catalog_shop.catalog.get(goal.asin)
    bare = product_without_options(catalog_shop)
    c = ReactStyleClient(catalog_client, f"fixed_{g}")
    assert nodes(c.html) == expected_start(catalog_shop, g)
    c.step(f"search[{product.title.lower().replace('/', ' ')}]")
    assert goal.asin in nodes(c.html)
    c.step(f"click[{goal.asin}]")
    value = next(iter(product.options.values()))[-1]
    c.step(f"click[{value}]")
    assert nodes(c.html) == expected_item(catalog_shop, g, goal.asin)
    for sub in ("Description", "Features", "Reviews", "Attributes"):
        c.step(f"click[{sub}]")
        assert nodes(c.html) == expected_sub(catalog_shop, g, goal.asin, sub)
        c.step("click[< Prev]")
    c.step("click[< Prev]")
    # Another product, without options; the remembered group of `value` goes into its URL.
    c.asin = bare
    c.page = "item"
    c.html = c.fetch()
    c.step(f"click[{value}]")
    assert c.options == {c.option_group[value]: value}
    assert nodes(c.html) == expected_item(catalog_shop, g, bare)
    c.step("click[Buy Now]")
    reward = compute_reward(catalog_shop.catalog.get(bare), goal, c.options).reward
    assert react_score(c.html) == reward
    assert nodes(c.html) == expected_done(catalog_shop, g, bare, c.options)

"""The served HTML and the page model agree: parsing the HTML the original WebShop's way gives
exactly the text, text_rich and clickables the shop renders from its page model.

Pages are reached like a person would reach them (following the forms and links of the
served HTML with Flask's test client), while the same actions go through ``Shop.step``; at
every page both sides must agree, and the served page must equal ``render_html`` of the
stepped state.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import unquote

import pytest
from bs4 import BeautifulSoup
from shop_pages import (
    html_clickables,
    html_clickables_original_order,
    html_has_search_bar,
    html_to_text,
    html_to_text_rich,
)

from gagpo.servers.webshop.html import render_html
from gagpo.servers.webshop.pages import render_text, render_text_rich
from gagpo.servers.webshop.shop import Shop, State


class HtmlBrowser:
    """Follows the served pages' own forms and links (what a person clicks)."""

    def __init__(self, client) -> None:
        self.client = client
        self.html = ""

    def _take(self, response) -> None:
        assert response.status_code == 200, (response.status_code, response.data[:300])
        self.html = response.get_data(as_text=True)

    def open(self, url: str) -> None:
        self._take(self.client.get(url, follow_redirects=True))

    def search(self, query: str) -> None:
        soup = BeautifulSoup(self.html, "html.parser")
        form = soup.find(id="search_input").find_parent("form")
        assert form.get("method") == "post"
        self._take(self.client.post(form["action"], data={"search_query": query},
                                    follow_redirects=True))

    def click(self, text: str) -> None:
        soup = BeautifulSoup(self.html, "html.parser")
        for button in soup.find_all("button", class_="btn"):
            if button.get_text().lower() == text:
                form = button.find_parent("form")
                method = form.get("method", "get").lower()
                self._take(self.client.open(form["action"], method=method.upper(),
                                            follow_redirects=True))
                return
        for link in soup.find_all("a", class_="product-link"):
            if link.get_text().lower() == text:
                return self.open(link["href"])
        for radio in soup.select('input[type="radio"]'):
            if radio.get("value") == text:
                return self.open(radio["data-url"])
        raise AssertionError(f"nothing to click named {text!r}")


def check_page(shop: Shop, state: State, served: str) -> None:
    """Served HTML vs page model, and render_html (with visited products) vs page model."""
    unvisited = replace(state, visited=frozenset())  # HTML pages do not track visits
    page = shop.page(unvisited)
    assert html_to_text(served) == render_text(page)
    assert html_to_text_rich(served) == render_text_rich(page)
    assert html_clickables_original_order(served) == list(page.clickables)
    assert set(html_clickables(served)) == set(page.clickables)
    assert html_has_search_bar(served) == page.has_search_bar
    assert served == render_html(shop, unvisited, f"fixed_{state.goal}")

    own = render_html(shop, state)
    assert html_to_text(own) == render_text(shop.page(state))
    assert html_to_text_rich(own) == render_text_rich(shop.page(state))

    soup = BeautifulSoup(served, "html.parser")
    instruction = shop.goal_of(state).instruction_text
    label = "Instruction: " if state.page == "search" else "Instruction:"  # as the original
    assert soup.find(id="instruction-text").h4.get_text() == f"{label}{instruction}"


def check_done(shop: Shop, state: State, served: str, reward: float) -> None:
    """The done page's text is the model's, node for node, and the score is in ``#reward``'s
    ``<pre>`` (where the original's browser env reads it)."""
    for html in (served, render_html(shop, state)):
        assert html_to_text(html) == render_text(shop.page(state))
        assert html_to_text_rich(html) == render_text_rich(shop.page(state))
        assert html_clickables(html) == []
        soup = BeautifulSoup(html, "html.parser")
        assert float(soup.find(id="reward").find_all("pre")[0].string) == reward
        info = soup.find(id="reward_info").get_text()
        for part in ("r_type", "r_att", "w_att", "query_match", "category_match",
                     "title_score"):
            assert f"'{part}'" in info


class Session:
    """One goal driven two ways at once: Shop.step and the served HTML."""

    def __init__(self, shop: Shop, client, goal: int) -> None:
        self.shop = shop
        self.state = shop.initial_state(goal)
        self.browser = HtmlBrowser(client)
        self.browser.open(f"/fixed_{goal}")
        self.check()

    def check(self) -> None:
        check_page(self.shop, self.state, self.browser.html)

    def search(self, query: str) -> None:
        result = self.shop.step(self.state, f"search[{query}]")
        assert result.valid, result.feedback
        self.state = result.state
        self.browser.search(query)
        self.check()

    def click(self, target: str) -> float:
        result = self.shop.step(self.state, f"click[{target}]")
        assert result.valid, result.feedback
        self.state = result.state
        self.browser.click(target)
        if result.done:
            check_done(self.shop, self.state, self.browser.html, result.reward)
        else:
            self.check()
        return result.reward

    def page(self):
        return self.shop.page(self.state)


def _goal_with_options(shop: Shop) -> int:
    for i, goal in enumerate(shop.goals[:300]):
        if shop.catalog.get(goal.asin).options:
            return i
    pytest.skip("no goal product with options")


def test_every_page_type(catalog_shop, catalog_client):
    """search, results p1/p2/p1, item without and with options, all sub-pages, done."""
    g = _goal_with_options(catalog_shop)
    goal = catalog_shop.goals[g]
    product = catalog_shop.catalog.get(goal.asin)
    s = Session(catalog_shop, catalog_client, g)
    s.search(product.title)
    assert s.state.page == "results"
    s.click("next >")
    assert s.state.page_num == 2
    s.click("< prev")
    assert s.state.page_num == 1
    target = goal.asin.lower()
    if target not in s.page().clickables:  # title search normally finds it on page 1
        target = next(c for c in s.page().clickables if catalog_shop.catalog.get(c) is not None)
    s.click(target)
    assert s.state.page == "item"
    item = catalog_shop.catalog.get(s.state.asin)
    for group, values in item.options.items():
        value = next((v for v in values if v.strip()), None)
        if value is not None:
            s.click(value)
            assert dict(s.state.options).get(group) == value
    for sub in ("description", "features", "reviews"):
        s.click(sub)
        assert s.state.page == "item_sub"
        s.click("< prev")
        assert s.state.page == "item"
    s.click("buy now")
    assert s.state.page == "done"


def test_back_to_search_and_prev_to_results(catalog_shop, catalog_client):
    s = Session(catalog_shop, catalog_client, 0)
    s.search(catalog_shop.goals[0].instruction_text)
    first = next((c for c in s.page().clickables if catalog_shop.catalog.get(c)), None)
    if first is None:
        pytest.skip("the instruction finds nothing")
    s.click(first)
    s.click("< prev")
    assert s.state.page == "results"
    s.click("back to search")
    assert s.state.page == "search"


def test_rule_baseline_pages_for_many_goals(catalog_shop, catalog_client):
    """Search the instruction, open the first hit, buy: every page agrees, for many goals."""
    for g in range(min(25, len(catalog_shop.goals))):
        s = Session(catalog_shop, catalog_client, g)
        s.search(catalog_shop.goals[g].instruction_text)
        hits = [c for c in s.page().clickables if catalog_shop.catalog.get(c)]
        if not hits:
            continue
        s.click(hits[0])
        s.click("buy now")


def test_visited_products_show_in_render_html_text_rich(catalog_shop):
    """render_html marks visited products, so text_rich from it equals the model's."""
    g = 0
    state = catalog_shop.initial_state(g)
    title = catalog_shop.catalog.get(catalog_shop.goals[g].asin).title
    state = catalog_shop.step(state, f"search[{title}]").state
    hit = next(c for c in catalog_shop.page(state).clickables if catalog_shop.catalog.get(c))
    state = catalog_shop.step(state, f"click[{hit}]").state
    state = catalog_shop.step(state, "click[< prev]").state
    rich = render_text_rich(catalog_shop.page(state))
    assert f"[clicked button] {hit.upper()} [clicked button_]" in rich
    assert html_to_text_rich(render_html(catalog_shop, state)) == rich


def test_links_use_the_original_url_shapes(catalog_shop, catalog_client):
    s = Session(catalog_shop, catalog_client, 0)
    s.search("red dress")
    soup = BeautifulSoup(s.browser.html, "html.parser")
    links = [unquote(a["href"]) for a in soup.find_all("a", class_="product-link")]
    if not links:
        pytest.skip("no hits")
    assert all(x.startswith("/item_page/fixed_0/") for x in links)
    assert links[0].endswith("/['red', 'dress']/1/{}")
    next_form = soup.find("button", string="Next >").find_parent("form")
    assert unquote(next_form["action"]) == "/search_results/fixed_0/['red', 'dress']/2"

"""A real browser on the served shop: headless Debian Chromium driven by selenium.

The shop runs under waitress on a free loopback port; the browser searches, opens a product,
chooses an option (the page's script follows the radio's URL) and sees the item page; then it
plays an episode the way WebShop's own Selenium env does, down to reading the score from
``#reward pre``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from shop_pages import dom_parsed

from gagpo.servers.webshop import open_shop
from gagpo.servers.webshop.web.app import create_app

# headless Chromium (conftest.py's chromium fixture); skipped where it is not installed
pytestmark = pytest.mark.browser(window="1280,900", eager=True)


@pytest.fixture(scope="module")
def base_url(serve):
    app = create_app(open_shop(num_products=200))
    with serve(app, threads=4) as url:
        yield url



def test_search_open_product_and_choose_option(chromium, base_url, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    shop = open_shop(num_products=200)
    goal = shop.goals[0]
    wait = WebDriverWait(chromium, 20)

    chromium.get(f"{base_url}/fixed_0")
    instruction = chromium.find_element(By.CSS_SELECTOR, "#instruction-text h4")
    assert goal.instruction_text in instruction.text
    assert instruction.is_displayed()

    box = chromium.find_element(By.ID, "search_input")
    box.send_keys(shop.catalog.get(goal.asin).title, Keys.ENTER)
    wait.until(ec.url_contains("/search_results/fixed_0/"))
    wait.until(dom_parsed)
    assert "Total results:" in chromium.find_element(By.TAG_NAME, "h3").text
    links = chromium.find_elements(By.CSS_SELECTOR, "a.product-link")
    assert links, "the title search found nothing"
    asins = [a.text for a in links]
    asin = goal.asin if goal.asin in asins else asins[0]
    chromium.find_element(By.LINK_TEXT, asin).click()

    wait.until(ec.url_contains(f"/item_page/fixed_0/{asin}/"))
    wait.until(dom_parsed)
    product = shop.catalog.get(asin)
    assert chromium.find_element(By.CSS_SELECTOR, "h2.item-title").text == product.title.strip()
    buy = chromium.find_element(By.XPATH, "//button[normalize-space()='Buy Now']")
    assert buy.is_displayed()
    assert chromium.find_element(By.ID, "product-image").is_displayed()

    if product.options:  # clicking an option's label reloads the page with it chosen
        group, values = next(iter(product.options.items()))
        value = values[-1]
        label = chromium.find_element(
            By.XPATH, f"//label[normalize-space()={_xpath_literal(value)}]")
        label.click()
        wait.until(ec.staleness_of(label))
        wait.until(dom_parsed)
        wait.until(ec.presence_of_element_located((By.ID, "product-image")))
        checked = chromium.find_elements(By.CSS_SELECTOR, 'input[type="radio"]:checked')
        assert [(r.get_attribute("name"), r.get_attribute("value")) for r in checked] == [
            (group, value)]

    shot = Path(tmp_path) / "item_page.png"
    assert chromium.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


def _xpath_literal(s: str) -> str:
    """An XPath string literal for ``s`` (XPath 1.0 has no escapes)."""
    if "'" not in s:
        return f"'{s}'"
    if '"' not in s:
        return f'"{s}"'
    return "concat(" + ", \"'\", ".join(f"'{part}'" for part in s.split("'")) + ")"


def test_original_browser_env_flow(chromium, base_url):
    """What WebShop's own Selenium env does, on our pages: open a session, read the
    instruction from ``#instruction-text h4``, type into ``#search_input`` and submit, collect
    clickables (``.btn`` and ``.product-link`` elements by their text, radio inputs by their
    value), click a result, an option (a hidden radio: the env falls back to a script click)
    and Buy Now, then read the score from the first ``<pre>`` in ``#reward`` of the page
    source."""
    from bs4 import BeautifulSoup
    from selenium.common.exceptions import ElementNotInteractableException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    shop = open_shop(num_products=200)
    g = next(i for i, goal in enumerate(shop.goals) if shop.catalog.get(goal.asin).options)
    goal = shop.goals[g]
    product = shop.catalog.get(goal.asin)
    wait = WebDriverWait(chromium, 20)

    def clickables() -> dict:
        found = chromium.find_elements(By.CLASS_NAME, "btn")
        found += chromium.find_elements(By.CLASS_NAME, "product-link")
        out = {b.text: b for b in found}
        for radio in chromium.find_elements(By.CSS_SELECTOR, "input[type='radio']"):
            out[radio.get_attribute("value")] = radio
        return out

    def click(name: str) -> None:
        element = clickables()[name]
        try:
            element.click()
        except ElementNotInteractableException:
            chromium.execute_script("arguments[0].click();", element)
        wait.until(ec.staleness_of(element))
        wait.until(dom_parsed)

    chromium.get(f"{base_url}/fixed_{g}")
    soup = BeautifulSoup(chromium.page_source, "html.parser")
    assert soup.find(id="instruction-text").h4.text == f"Instruction: {goal.instruction_text}"

    bar = chromium.find_element(By.ID, "search_input")
    bar.send_keys(product.title)
    bar.submit()
    wait.until(ec.url_contains(f"/search_results/fixed_{g}/"))
    wait.until(dom_parsed)
    assert goal.asin in clickables(), "the title search did not find the goal product"
    click(goal.asin)
    assert f"/item_page/fixed_{g}/{goal.asin}/" in chromium.current_url
    assert {"Back to Search", "< Prev", "Description", "Features", "Reviews",
            "Buy Now"} <= set(clickables())

    chosen = {}
    for group, values in product.options.items():
        click(values[-1])
        chosen[group] = values[-1]
    checked = chromium.find_elements(By.CSS_SELECTOR, "input[type='radio']:checked")
    assert {r.get_attribute("name"): r.get_attribute("value") for r in checked} == chosen

    click("Buy Now")
    assert f"/done/fixed_{g}/{goal.asin}/" in chromium.current_url
    html_obj = BeautifulSoup(chromium.page_source, "html.parser")
    r = html_obj.find(id="reward")
    reward = float(r.find_all("pre")[0].string) if r is not None else 0.0
    from gagpo.servers.webshop.reward import compute_reward

    assert reward == compute_reward(product, goal, chosen).reward
    assert chromium.find_element(By.CSS_SELECTOR, "#reward pre").text == f"{reward}"

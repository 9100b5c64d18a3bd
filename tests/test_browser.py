"""A real browser on the served shop: headless Debian Chromium driven by selenium.

The shop runs under waitress on a free loopback port; the browser searches, opens a product,
chooses an option (the page's script follows the radio's URL) and sees the item page.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from servers.webshop import open_shop
from servers.webshop.app import create_app

try:
    from conftest_shop import serve_in_thread
except ImportError:  # tests/ imported as a package
    from tests.conftest_shop import serve_in_thread

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)),
        reason=f"needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}): "
               "apt-get install chromium chromium-driver",
    ),
]


@pytest.fixture(scope="module")
def base_url():
    app = create_app(open_shop(num_products=200))
    with serve_in_thread(app, threads=4) as url:
        yield url


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    profile = tmp_path_factory.mktemp("chromium-profile")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # Catalog images are remote URLs; don't let an offline DNS lookup hold up page loads.
    options.page_load_strategy = "eager"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1280,900",
                f"--user-data-dir={profile}"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(30)
    yield browser
    browser.quit()
    shutil.rmtree(profile, ignore_errors=True)


def test_search_open_product_and_choose_option(driver, base_url, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    shop = open_shop(num_products=200)
    goal = shop.goals[0]
    wait = WebDriverWait(driver, 20)

    driver.get(f"{base_url}/fixed_0")
    instruction = driver.find_element(By.CSS_SELECTOR, "#instruction-text h4")
    assert goal.instruction_text in instruction.text
    assert instruction.is_displayed()

    box = driver.find_element(By.ID, "search_input")
    box.send_keys(shop.catalog.get(goal.asin).title, Keys.ENTER)
    wait.until(ec.url_contains("/search_results/fixed_0/"))
    assert "Total results:" in driver.find_element(By.TAG_NAME, "h3").text
    links = driver.find_elements(By.CSS_SELECTOR, "a.product-link")
    assert links, "the title search found nothing"
    asins = [a.text for a in links]
    asin = goal.asin if goal.asin in asins else asins[0]
    driver.find_element(By.LINK_TEXT, asin).click()

    wait.until(ec.url_contains(f"/item_page/fixed_0/{asin}/"))
    product = shop.catalog.get(asin)
    assert driver.find_element(By.CSS_SELECTOR, "h2.item-title").text == product.title.strip()
    buy = driver.find_element(By.XPATH, "//button[normalize-space()='Buy Now']")
    assert buy.is_displayed()
    assert driver.find_element(By.ID, "product-image").is_displayed()

    if product.options:  # clicking an option's label reloads the page with it chosen
        group, values = next(iter(product.options.items()))
        value = values[-1]
        label = driver.find_element(
            By.XPATH, f"//label[normalize-space()={_xpath_literal(value)}]")
        label.click()
        wait.until(ec.staleness_of(label))
        wait.until(ec.presence_of_element_located((By.ID, "product-image")))
        checked = driver.find_elements(By.CSS_SELECTOR, 'input[type="radio"]:checked')
        assert [(r.get_attribute("name"), r.get_attribute("value")) for r in checked] == [
            (group, value)]

    shot = Path(tmp_path) / "item_page.png"
    assert driver.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


def _xpath_literal(s: str) -> str:
    """An XPath string literal for ``s`` (XPath 1.0 has no escapes)."""
    if "'" not in s:
        return f"'{s}'"
    if '"' not in s:
        return f'"{s}"'
    return "concat(" + ", \"'\", ".join(f"'{part}'" for part in s.split("'")) + ")"

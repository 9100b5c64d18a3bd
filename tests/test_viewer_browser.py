"""``gagpo view`` in a real browser: headless Debian Chromium (as the shop's browser test) on
a run the test trains with the tiny model (two iterations, held-out evaluation and the
recomputed log-probs on, so that every curve has data) and on a synthetic run written by the
trainer's own writer (advantages of both signs, states shared and not). The viewer is served
by waitress on a free loopback port; no page may load anything from elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from gagpo.run_folder import read_step_table, step_tables
from gagpo.synthetic_run import synthetic_run
from gagpo.viewer.app import create_app
from gagpo.viewer.data import CHARTS

# headless Chromium (conftest.py's chromium fixture); skipped where it is not installed
pytestmark = pytest.mark.browser(window="1400,1000")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from test_trainer import _tiny_cfg  # tests/ is on sys.path (pyproject's pythonpath)

    from gagpo.trainer import train

    root = tmp_path_factory.mktemp("view-runs")
    train(_tiny_cfg(root / "tiny", iterations=2, eval_episodes=2, eval_every=1,
                    recompute_old_logp=True))
    synthetic_run(root / "synth", iterations=2, steps=60, group_size=4, max_t=5)
    return root


@pytest.fixture(scope="module")
def base_url(runs, serve):
    app = create_app([runs / "tiny", runs / "synth", runs / "missing"])
    with serve(app, threads=4) as url:
        yield url



def _only_local(chromium, base_url):
    """Every resource the page loaded came from the viewer itself."""
    names = chromium.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)")
    assert names and all(n.startswith(base_url + "/") for n in names), names


def test_run_page_shows_every_curve_with_data(chromium, base_url):
    from selenium.webdriver.common.by import By

    chromium.get(f"{base_url}/run?r=tiny")
    for chart_id, title, lines, _ in CHARTS:
        svg = chromium.find_element(By.ID, f"chart-{chart_id}")
        assert svg.is_displayed()
        series = svg.find_elements(By.CSS_SELECTOR, ".series")
        assert len(series) == len(lines), title
        for s in series:
            assert int(s.get_attribute("data-points")) >= 1, (title, s.get_attribute(
                "data-label"))
    _only_local(chromium, base_url)
    # Two runs overlay: each chart holds both runs' series.
    chromium.get(f"{base_url}/run?r=tiny&r=synth")
    svg = chromium.find_element(By.ID, "chart-kl")
    labels = [s.get_attribute("data-label") for s in svg.find_elements(By.CSS_SELECTOR,
                                                                       ".series")]
    assert labels == ["tiny: kl", "synth: kl"]


@pytest.mark.parametrize("name", ["tiny", "synth"])
def test_rollout_browser_matches_the_saved_table(chromium, base_url, runs, name):
    from selenium.webdriver.common.by import By

    paths = step_tables(runs / name)[2]
    table = read_step_table(paths)
    group = int(table["group"][-1])
    rows = np.flatnonzero(table["group"] == group)
    chromium.get(f"{base_url}/run/{name}/iter/2?group={group}")
    _only_local(chromium, base_url)
    grid = chromium.find_element(By.ID, "rollouts")
    assert int(grid.get_attribute("data-columns")) == len(set(table["trajectory"][rows]))
    heads = grid.find_elements(By.CSS_SELECTOR, ".colhead")
    assert len(heads) == len(set(table["trajectory"][rows]))
    saved = {(int(table["trajectory"][i]), int(table["t"][i])): i for i in rows}
    colour_of: dict[str, str] = {}
    shown_adv, saved_adv = [], []
    cells = grid.find_elements(By.CSS_SELECTOR, ".step")
    assert len(cells) == len(rows)
    for cell in cells:
        i = saved[int(cell.get_attribute("data-traj")), int(cell.get_attribute("data-t"))]
        chip = cell.find_element(By.CSS_SELECTOR, ".chip")
        key = chip.get_attribute("data-key")
        assert key == str(table["state_key"][i])
        colour = chip.value_of_css_property("background-color")
        if int(table["state_group_size"][i]) > 1:  # shared states: one colour per key
            assert colour_of.setdefault(key, colour) == colour
        bar = cell.find_element(By.CSS_SELECTOR, ".bar.advantage")
        shown_adv.append(float(bar.get_attribute("data-value")))
        saved_adv.append(float(table["advantage"][i]))
        fill = bar.find_element(By.CSS_SELECTOR, ".fill")
        if saved_adv[-1] != 0:
            assert ("pos" in fill.get_attribute("class")) == (saved_adv[-1] > 0)
        assert ("zero" in cell.get_attribute("class").split()) == (saved_adv[-1] == 0)
        assert cell.find_element(By.CSS_SELECTOR, ".reply pre").text.strip() == \
            str(table["reply"][i]).strip()
    assert len(set(colour_of.values())) == len(colour_of)  # different keys, different colours
    assert np.array_equal(np.sign(shown_adv), np.sign(saved_adv))
    assert np.array_equal(np.argsort(shown_adv, kind="stable"),
                          np.argsort(saved_adv, kind="stable"))


def _apply_filters(chromium) -> None:
    """Submit the filter form and wait for the page it loads (a click returns before the
    navigation may have replaced the page on a loaded machine)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    page = chromium.find_element(By.TAG_NAME, "html")
    chromium.find_element(By.ID, "f-apply").click()
    WebDriverWait(chromium, 30).until(ec.staleness_of(page))
    WebDriverWait(chromium, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete")


def test_filters_in_the_browser(chromium, base_url, runs):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    table = read_step_table(step_tables(runs / "synth")[1])
    won_group = int(table["group"][np.flatnonzero(table["won"])[0]])
    chromium.get(f"{base_url}/run/synth/iter/1?group={won_group}")
    Select(chromium.find_element(By.ID, "f-outcome")).select_by_value("won")
    _apply_filters(chromium)
    heads = chromium.find_elements(By.CSS_SELECTOR, "#rollouts .colhead")
    assert heads and all("won" in h.get_attribute("class").split() for h in heads)
    Select(chromium.find_element(By.ID, "f-outcome")).select_by_value("")
    chromium.find_element(By.ID, "f-shared").click()
    _apply_filters(chromium)
    rows = np.flatnonzero(table["group"] == won_group)
    hidden = chromium.find_elements(By.CSS_SELECTOR, "#rollouts .step.hidden")
    assert len(hidden) == int((table["state_group_size"][rows] == 1).sum())
    task_type = str(table["task_type"][0])
    Select(chromium.find_element(By.ID, "f-type")).select_by_value(task_type)
    _apply_filters(chromium)
    types = {r.find_elements(By.TAG_NAME, "td")[2].text
             for r in chromium.find_elements(By.CSS_SELECTOR, "#groups .grouprow")}
    assert types == {task_type}


def test_missing_run_and_missing_iteration_read_clearly(chromium, base_url):
    from selenium.webdriver.common.by import By

    chromium.get(f"{base_url}/run?r=missing")
    assert "does not exist" in chromium.find_element(By.CSS_SELECTOR, ".problem").text
    chromium.get(f"{base_url}/run/tiny/iter/99")
    assert "no step table for iteration 99" in chromium.find_element(By.ID, "error").text
    _only_local(chromium, base_url)

"""An option value offered by several groups sets the first group not already holding it (the
original always set the last one): through the shop's transitions and through WebShop-v0."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

import gagpo.envs  # noqa: F401  (registers WebShop-v0)
from gagpo.servers.webshop.catalog import load_catalog
from gagpo.servers.webshop.goals import build_goals
from gagpo.servers.webshop.search import SearchEngine
from gagpo.servers.webshop.shop import Shop

ASIN = "B0SHARED01"
# "White" is a value of three groups; "Black" and "Gum" of one each.
OPTIONS = {
    "Color": ["Black", "White"],
    "Sole": ["White", "Gum"],
    "Laces": ["Red", "White"],
}


@pytest.fixture()
def catalog_dir(tmp_path: Path, monkeypatch) -> Path:
    """A one-product catalog in the original file format, with a human goal for it."""
    monkeypatch.setenv("GAGPO_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "catalog"
    folder.mkdir()
    record = {
        "asin": ASIN, "name": "Canvas Sneaker", "full_description": "A sneaker.",
        "small_description": ["canvas upper"], "pricing": "$30.00", "images": [],
        "category": "fashion", "query": "sneakers", "product_category": "Clothing › Shoes",
        "customization_options": {
            group: [{"value": v, "image": None} for v in values]
            for group, values in OPTIONS.items()
        },
    }
    human = {ASIN: [{"instruction": "i want a white canvas sneaker",
                     "instruction_attributes": ["canvas"], "instruction_options": ["white"]}]}
    (folder / "items_shuffle.json").write_text(json.dumps([record]))
    (folder / "items_ins_v2.json").write_text("{}")
    (folder / "items_human_ins.json").write_text(json.dumps(human))
    return folder


def _options_after(shop: Shop, clicks: list[str]) -> list[dict[str, str]]:
    """The chosen options after each click, from the product's page."""
    state = shop.initial_state(0)
    for action in ("search[canvas sneaker]", f"click[{ASIN.lower()}]"):
        result = shop.step(state, action)
        assert result.valid, result.feedback
        state = result.state
    seen = []
    for value in clicks:
        result = shop.step(state, f"click[{value}]")
        assert result.valid, result.feedback
        state = result.state
        seen.append(dict(state.options))
    return seen


def test_shared_value_sets_the_first_group_not_holding_it(catalog_dir):
    cat = load_catalog(catalog_dir)
    shop = Shop(catalog=cat, goals=build_goals(cat, "human"), search_engine=SearchEngine(cat))
    assert list(cat.get(ASIN).options) == ["color", "sole", "laces"]  # the groups' order
    # Each click fills the next group, in the product's group order; once every group holds
    # it, another click changes nothing.
    assert _options_after(shop, ["white"] * 4) == [
        {"color": "white"},
        {"color": "white", "sole": "white"},
        {"color": "white", "sole": "white", "laces": "white"},
        {"color": "white", "sole": "white", "laces": "white"},
    ]
    # A group holding another value is "not holding it": the first group is replaced.
    assert _options_after(shop, ["black", "white", "gum", "white"]) == [
        {"color": "black"},
        {"color": "white"},
        {"color": "white", "sole": "gum"},
        {"color": "white", "sole": "white"},
    ]


def _clicked_by_group(text_rich: str) -> dict[str, list[str]]:
    """The values shown as clicked under each option group of a ``text_rich`` item page."""
    clicked: dict[str, list[str]] = {}
    group = None
    for line in text_rich.splitlines():
        if line.startswith("  ["):  # an option of the group above
            if line.startswith("  [clicked button] "):
                clicked.setdefault(group, []).append(line.split("] ", 1)[1].rsplit(" [", 1)[0])
        elif line.lower() in {g.lower() for g in OPTIONS}:
            group = line
    return clicked


def test_shared_value_through_webshop_env(catalog_dir):
    env = gym.make("WebShop-v0", catalog=str(catalog_dir), observation_mode="text_rich")
    try:
        env.reset(options={"task": 0})
        env.step("search[canvas sneaker]")
        obs, *_ = env.step(f"click[{ASIN.lower()}]")
        assert _clicked_by_group(obs) == {}
        obs, *_ = env.step("click[white]")
        assert _clicked_by_group(obs) == {"color": ["white"]}
        obs, *_ = env.step("click[white]")
        assert _clicked_by_group(obs) == {"color": ["white"], "sole": ["white"]}
        obs, reward, terminated, _, info = env.step("click[buy now]")
        assert terminated and info["page"] == "done"
        # The done page lists the options bought, by group.
        assert '{"color": "white", "sole": "white"}' in obs
        # Again, with the first group holding another value.
        env.reset(options={"task": 0})
        env.step("search[canvas sneaker]")
        env.step(f"click[{ASIN.lower()}]")
        env.step("click[black]")
        obs, *_ = env.step("click[white]")
        assert _clicked_by_group(obs) == {"color": ["white"]}
        obs, *_ = env.step("click[buy now]")
        assert '{"color": "white"}' in obs
    finally:
        env.close()

"""Helpers for the served-shop tests: the original WebShop's HTML-to-text parsing (written
here, never in the shop: the shop renders text from its page model) and a tricky catalog.

Plain functions, imported as ``from shop_pages import ...`` (pytest puts tests/ on sys.path:
``pythonpath`` in pyproject.toml). The fixtures (a served app, headless Chromium, the small
shops) are in conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

from bs4 import BeautifulSoup
from bs4.element import Comment, NavigableString, Tag

_HIDDEN_PARENTS = {"style", "script", "head", "title", "meta", "[document]"}


def _visible(s: NavigableString) -> bool:
    """The original's ``tag_visible``."""
    return s.parent.name not in _HIDDEN_PARENTS and not isinstance(s, Comment)


def visible_nodes(html: str) -> list[NavigableString]:
    """Every visible text node (BeautifulSoup html.parser), raw, whitespace-only ones included:
    what the original's clients (ReAct's, WebShop's browser env) collect."""
    soup = BeautifulSoup(html, "html.parser")
    return [s for s in soup.find_all(string=True) if _visible(s)]


def visible_strings(html: str) -> list[NavigableString]:
    """Visible text nodes, non-empty once stripped."""
    return [s for s in visible_nodes(html) if s.strip()]


def visible_texts(html: str) -> list[str]:
    return [s.strip() for s in visible_strings(html)]


def html_to_text(html: str) -> str:
    """The ``text`` observation the original computes from a page."""
    return " [SEP] ".join(visible_texts(html))


def html_to_text_rich(html: str) -> str:
    """The ``text_rich`` observation the original computes from a page: text in a <button>
    is a button, text in a <label> an option (clicked when its radio is checked), text whose
    parent has class ["product-link"] a product (clicked when the link says it was visited;
    the original looked that up in its session table)."""
    soup = BeautifulSoup(html, "html.parser")
    checked = {r.get("id") for r in soup.select('input[type="radio"]') if r.has_attr("checked")}
    obs = ""
    for s in soup.find_all(string=True):
        if not _visible(s) or not s.strip():
            continue
        t = s.strip()
        parent = s.parent
        if parent.name == "button":
            line = f"[button] {t} [button_]"
        elif parent.name == "label":
            if parent.get("for") in checked:
                line = f"  [clicked button] {t} [clicked button_]"
                obs = f"You have clicked {t}.\n" + obs
            else:
                line = f"  [button] {t} [button_]"
        elif parent.get("class") == ["product-link"]:
            mark = "clicked button" if parent.get("data-visited") == "true" else "button"
            line = f"\n[{mark}] {t} [{mark}_]"
        else:
            line = t
        obs += line + "\n"
    return obs


def _is_clickable(tag: Tag) -> bool:
    classes = tag.get("class") or []
    if "btn" in classes or "product-link" in classes:
        return True
    return tag.name == "input" and tag.get("type") == "radio"


def html_clickables(html: str) -> list[str]:
    """Clickables in document order (buttons ``.btn``, ``.product-link``s, radio values),
    lower-cased and de-duplicated."""
    soup = BeautifulSoup(html, "html.parser")
    out = []
    for tag in soup.find_all(_is_clickable):
        text = tag.get("value", "") if tag.name == "input" else tag.get_text()
        out.append(text.lower())
    return list(dict.fromkeys(out))


def html_clickables_original_order(html: str) -> list[str]:
    """The original's ``get_available_actions()`` clickables: buttons and product links
    first, then radio values."""
    soup = BeautifulSoup(html, "html.parser")
    out = {t.get_text().lower(): t for t in soup.find_all(class_="btn")
           + soup.find_all(class_="product-link")}
    for radio in soup.select('input[type="radio"]'):
        out[radio.get("value")] = radio
    return list(out)


def html_has_search_bar(html: str) -> bool:
    return BeautifulSoup(html, "html.parser").find(id="search_input") is not None


# ---------------------------------------------------------------------------- tricky catalog


def dom_parsed(driver) -> bool:
    """For ``WebDriverWait.until`` after a navigation: the new document is parsed (images may
    still load). The old page going stale is not enough: reading a document still loading
    fails in Chrome with "Node with given id does not belong to the document"."""
    return driver.execute_script("return document.readyState") != "loading"


def write_tricky_catalog(folder: Path, n: int = 40) -> Path:
    """A small catalog in the original format whose texts are hard to render right: markup,
    ampersands, quotes, slashes, non-ASCII, blank bullets, options with '/' and quotes."""
    folder.mkdir(parents=True, exist_ok=True)
    words = ["red", "blue", "cotton", "dress", "shoe", "lamp", "desk", "chair", "soap", "tea"]
    items, ins, human = [], {}, {}
    for i in range(n):
        asin = f"B{i:09d}"
        w1, w2 = words[i % 10], words[(i * 3 + 1) % 10]
        title = f"{w1.title()} {w2} item {i}"
        if i % 3 == 0:
            title = f'{w1.title()} <b>{w2}</b> & "friends" / café {i}'
        items.append({
            "asin": asin,
            "name": title,
            "full_description": f"A {w1} {w2}.\n<script>alert({i})</script> & more &amp; so on",
            "small_description": [f"{w1} feature", "   ", f"{w2} / slash <i>feature</i>"],
            "pricing": f"${10 + i}.99" if i % 5 else "$10.00 - $20.00",
            "customization_options": None if i % 2 else {
                "Color": [{"value": "Red", "image": None}, {"value": "Navy/Blue", "image": None},
                          {"value": 'it\'s "q"', "image": None}],
                "Size": [{"value": "Small", "image": None}, {"value": " X-Large ", "image": None}],
            },
            "images": [],
            "category": "fashion",
            "query": f"{w1} {w2}",
            "product_category": "Clothing \u203a Women \u203a Dresses",
        })
        ins[asin] = {"attributes": [w1, w2], "instruction": f"i want a {w1} {w2}",
                     "instruction_attributes": [w1]}
        human[asin] = [{"instruction": f"I need a {w1} {w2} <b>now</b> & fast.",
                        "instruction_attributes": [w1], "instruction_options": ["red"]}]
    (folder / "items_shuffle.json").write_text(json.dumps(items))
    (folder / "items_ins_v2.json").write_text(json.dumps(ins))
    (folder / "items_human_ins.json").write_text(json.dumps(human))
    return folder

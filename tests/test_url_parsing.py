"""The served shop's URLs as the original's clients write them: keywords (a list literal or
plain words), result page numbers and chosen options, read back from the links of the page a
URL yields, and every malformed part answered with a 4xx that says what is wrong."""

from __future__ import annotations

import html
import re
from urllib.parse import quote, unquote

import pytest

from gagpo.servers.webshop import open_shop
from gagpo.servers.webshop.shop import MAX_QUERY_CHARS
from gagpo.servers.webshop.web.app import create_app

SECRET = "url-parsing-test-secret"
MAX_LITERAL_CHARS = 8 * MAX_QUERY_CHARS  # the app's bound on a URL literal


@pytest.fixture(scope="module")
def shop():
    return open_shop(num_products=200)


@pytest.fixture(scope="module")
def client(shop):
    return create_app(shop, secret=SECRET).test_client()


def links(page: str) -> list[str]:
    found = re.findall(r'(?:href|action)="([^"]+)"', page)
    return [unquote(h) for h in found]


def get(client, path: str) -> tuple[int, str]:
    """Status and page text (entities decoded, so that messages read as written)."""
    r = client.get(path)
    assert r.status_code != 500
    return r.status_code, html.unescape(r.get_data(as_text=True))


def error_of(page: str) -> str:
    """The message of an error page, exactly."""
    m = re.search(r"<h2>Error \d+</h2>\s*<p>(.*?)</p>", page, re.S)
    assert m is not None, page
    return m.group(1)


def results(client, keywords: str, page: str = "1") -> tuple[int, str]:
    return get(client, f"/search_results/fixed_0/{quote(keywords, safe='')}/{page}")


def item_links(page: str) -> list[list[str]]:
    """The item links of a results page, split into their path segments."""
    return [h.split("/") for h in links(page) if h.startswith("/item_page/")]


def an_asin(client) -> str:
    code, page = results(client, "red shoes")
    assert code == 200
    return item_links(page)[0][3]


# --- keywords ---------------------------------------------------------------------------------


def test_plain_keywords_are_lower_cased_and_split_on_single_spaces(client):
    code, page = results(client, "Red Running  Shoes", page="2")
    assert code == 200
    items = item_links(page)
    assert items, "the results page links its products"
    for seg in items:
        # keywords, then the page number the URL named
        assert seg[4:6] == ["['red', 'running', '', 'shoes']", "2"]


def test_keyword_lists_are_kept_as_written(client):
    code, page = results(client, "['Red', 'shoes']")
    assert code == 200
    assert item_links(page)[0][4:6] == ["['Red', 'shoes']", "1"]


NOT_A_LIST = "Keywords must be a list of strings."
NOT_A_LITERAL = "The keywords in the URL is not a valid literal."


@pytest.mark.parametrize(
    ("keywords", "message"),
    [("[1, 2]", NOT_A_LIST), ("['red', 3]", NOT_A_LIST), ("[['red']]", NOT_A_LIST),
     ("['red'", NOT_A_LITERAL), ("[red]", NOT_A_LITERAL), ("[" * 60 + "]" * 60, NOT_A_LIST)],
)
def test_keyword_lists_that_are_not_lists_of_strings_are_refused(client, keywords, message):
    code, page = results(client, keywords)
    assert code == 400
    assert error_of(page) == message


def test_keywords_too_long_for_any_query_are_refused_before_parsing(client):
    literal = "['" + "a" * (MAX_LITERAL_CHARS - 4) + "']"
    assert len(literal) == MAX_LITERAL_CHARS
    code, page = results(client, literal)  # parsed: the query itself is too long
    assert code == 413 and error_of(page).startswith("Search query too long")
    code, page = results(client, literal[:-2] + "a']")  # one more: the URL part is refused
    assert code == 413 and error_of(page) == "The keywords in the URL is too long."
    plain = "a" * MAX_LITERAL_CHARS
    code, page = results(client, plain)
    assert code == 413 and error_of(page).startswith("Search query too long")
    code, page = results(client, plain + "a")
    assert code == 413 and error_of(page) == "The keywords in the URL are too long."


def test_keywords_are_checked_like_a_search(client):
    code, page = results(client, "a" * MAX_QUERY_CHARS)
    assert code == 200
    code, page = results(client, "a" * (MAX_QUERY_CHARS + 1))
    assert code == 413 and "Search query too long" in page
    for empty in ("   ", "['', ' ']", "\x00", " " * MAX_QUERY_CHARS):
        code, page = results(client, empty)
        assert code == 400 and "Empty search" in page, empty


# --- page numbers -----------------------------------------------------------------------------


@pytest.mark.parametrize("page", ["0", "1", "002", "9999999"])
def test_page_numbers_are_whole_numbers_of_up_to_seven_digits(client, page):
    code, text = results(client, "red shoes", page)
    assert code == 200
    if page in ("1", "002"):  # page 0 and pages past the last show no products
        items = item_links(text)
        assert items and all(seg[5] == str(int(page)) for seg in items)


@pytest.mark.parametrize("page", ["-1", "1.5", "one", "10000000", "1 ", "+1"])
def test_other_page_numbers_are_refused(client, page):
    code, text = results(client, "red shoes", quote(page))
    assert code == 400
    assert error_of(text) == "The page number must be a whole number, 0 or more."


# --- options ----------------------------------------------------------------------------------


def test_options_are_read_back_whole(client):
    asin = an_asin(client)
    code, page = get(client, f"/item_page/fixed_0/{asin}/{quote(str(['red']))}/1/"
                             + quote("{'size': 'large', 'color': 'red'}"))
    assert code == 200
    buy = [h for h in links(page) if h.startswith("/done/")]
    assert buy == [f"/done/fixed_0/{asin}/{{'color': 'red', 'size': 'large'}}"]


@pytest.mark.parametrize(
    "options",
    ["['size']", "{'size': 1}", "{1: 'large'}", "{'size': ['large']}", "{'size'", "size=large"],
)
def test_options_that_are_not_a_dict_of_strings_are_refused(client, options):
    asin = an_asin(client)
    code, page = get(client, f"/done/fixed_0/{asin}/{quote(options, safe='')}")
    assert code == 400
    assert error_of(page) in ("Options must be a dict of strings, like {'color': 'red'}.",
                              "The options in the URL is not a valid literal.")


def test_options_with_lone_surrogates_are_refused(client):
    asin = an_asin(client)
    for options in ("{'size': '\\ud800'}", "{'\\udfff': 'large'}"):
        code, page = get(client, f"/done/fixed_0/{asin}/{quote(options, safe='')}")
        assert code == 400 and error_of(page) == "Options must be valid Unicode text.", options


def test_option_literals_too_long_are_refused_before_parsing(client):
    asin = an_asin(client)
    options = "{'size': '" + "x" * MAX_LITERAL_CHARS + "'}"
    code, page = get(client, f"/done/fixed_0/{asin}/{quote(options, safe='')}")
    assert code == 413 and error_of(page) == "The options in the URL is too long."

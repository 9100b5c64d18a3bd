"""The ReAct reply parser on well-formed, malformed, empty, huge and adversarial replies."""

import time

import pytest

from gagpo.agents.parser import (
    ParsedAction,
    fill_template,
    fills_template,
    is_template,
    match_admissible,
    nearest_admissible,
    parse_reply,
)

SHOP = ["click[back to search]", "click[< prev]", "click[buy now]", "click[b0abc12345]",
        "click[large]", "click[x-large]"]
SEARCH = ["search[<query>]"]
HOUSE = ["go to countertop 1", "go to countertop 2", "open fridge 1", "take apple 1 from table 1",
         "inventory", "look"]


def ok(action, admissible=True):
    return ParsedAction(action, well_formed=True, admissible=admissible)


# --- well-formed ----------------------------------------------------------------------------

@pytest.mark.parametrize(
    "reply, actions, expected",
    [
        ("<think>the item fits</think><action>click[buy now]</action>", SHOP, ok("click[buy now]")),
        ("<think>a</think>\n\n<action>\n  click[buy now]\n</action>\n", SHOP, ok("click[buy now]")),
        # Tags in any case, with a little whitespace; the action takes the admissible spelling.
        ("<THINK>x</Think> < action >Click[Buy   Now]</ action>", SHOP, ok("click[buy now]")),
        ("<think>multi\nline\nreasoning</think><action>open fridge 1</action>", HOUSE,
         ok("open fridge 1")),
        # Any non-empty query fills WebShop's search template; the query keeps its case.
        ("<think>t</think><action>search[Red Running  Shoes, size 10]</action>", SEARCH,
         ok("search[Red Running Shoes, size 10]")),
        # A well-formed reply whose action is simply not offered.
        ("<think>t</think><action>click[small]</action>", SHOP, ok("click[small]", False)),
        ("<think></think><action>look</action>", HOUSE, ok("look")),
    ],
)
def test_well_formed(reply, actions, expected):
    assert parse_reply(reply, actions) == expected


def test_without_admissible_list_nothing_is_admissible():
    p = parse_reply("<think>t</think><action>click[buy now]</action>")
    assert p == ParsedAction("click[buy now]", True, False)


# --- malformed ------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "reply, action, admissible",
    [
        ("<action>click[buy now]</action>", "click[buy now]", True),  # no think
        ("<think>t</think>click[buy now]", None, False),  # no action tags
        ("click[buy now]", None, False),  # bare text
        ("<think>t</think><action>click[buy now]", "click[buy now]", True),  # unclosed action
        ("<think>no end <action>click[buy now]</action>", "click[buy now]", True),  # unclosed think
        # The first action block counts; a second one makes the reply malformed.
        ("<think>t</think><action>click[large]</action><action>click[buy now]</action>",
         "click[large]", True),
        ("<think>t</think><action>click[buy now]</action> and then I will rest", "click[buy now]",
         True),  # text after the action
        ("I think <think>t</think><action>click[buy now]</action>", "click[buy now]", True),
        ("<think>t</think><action>   </action>", None, False),  # empty action
        ("<think>t</think><action></action>", None, False),
        ("<action>click[buy now]</action><think>t</think>", "click[buy now]", True),  # wrong order
        ("<think>a</think><think>b</think><action>click[buy now]</action>", "click[buy now]", True),
        ("</action><think>t</think><action>click[buy now]</action>", "click[buy now]", True),
        # A "</think>" first (the template opened the block): the action is found.
        ("reasoning here</think><action>click[buy now]</action>", "click[buy now]", True),
        ("<think>t</think><action>click[buy now]</think>", "click[buy now]", True),
    ],
)
def test_malformed(reply, action, admissible):
    p = parse_reply(reply, SHOP)
    assert p.well_formed is False
    assert p.action == action
    assert p.admissible is admissible
    assert p.mapped_from is None


@pytest.mark.parametrize("reply", ["", " ", "\n\t", "<think></think>", "<action>", "</action>"])
def test_empty_replies(reply):
    assert parse_reply(reply, SHOP) == ParsedAction(None, False, False)


# --- adversarial ----------------------------------------------------------------------------

def test_actions_inside_think_are_ignored():
    reply = ("<think>I could write <action>click[buy now]</action> but I will not</think>"
             "<action>click[large]</action>")
    assert parse_reply(reply, SHOP) == ok("click[large]")
    # Only inside think: no action at all.
    p = parse_reply("<think>maybe <action>click[buy now]</action></think>", SHOP)
    assert p.action is None and not p.well_formed


def test_fake_tags_and_injection():
    # Look-alike tags are plain text.
    p = parse_reply("<think>t</think><actions>click[buy now]</actions>", SHOP)
    assert p.action is None
    p = parse_reply("<think>t</think><action_>click[buy now]</action_>", SHOP)
    assert p.action is None
    # A closing think inside the action block ends the action there.
    p = parse_reply("<think>t</think><action>click[buy now]</think><action>look</action>", HOUSE)
    assert p.action == "click[buy now]" and not p.well_formed
    # The literal template is not a query.
    p = parse_reply("<think>t</think><action>search[<query>]</action>", SEARCH)
    assert p == ParsedAction("search[<query>]", True, False)
    p = parse_reply("<think>t</think><action>search[]</action>", SEARCH)
    assert not p.admissible
    p = parse_reply("<think>t</think><action>search[   ]</action>", SEARCH)
    assert not p.admissible
    # Angle brackets in an action are text ("click[< prev]" is a real WebShop button).
    assert parse_reply("<think>t</think><action>click[< prev]</action>", SHOP) == ok(
        "click[< prev]")
    # Non-string input and odd characters do not raise.
    assert parse_reply("<think>\x00\ufffd</think><action>look\u200b</action>", HOUSE).action
    assert parse_reply(None, HOUSE).action is None  # type: ignore[arg-type]


def test_unicode_and_newlines_in_action():
    p = parse_reply("<think>t</think><action>search[café\n crème]</action>", SEARCH)
    assert p == ok("search[café crème]")


# --- huge -----------------------------------------------------------------------------------

MB = 1_000_000


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("x" * MB, None),
        # would make an unbounded whitespace pattern backtrack quadratically:
        ("<" + " " * MB, None),
        ("< " * (MB // 2), None),
        ("<think><action>" * (MB // 15), None),  # every think unclosed, every action unclosed
        ("<think>" * (MB // 7), None),
        ("</think>" * (MB // 8), None),
        ("<action>" * (MB // 8), None),
        ("<think>" + "a " * (MB // 2) + "</think><action>click[buy now]</action>",
         ok("click[buy now]")),
        ("<think>t</think><action>" + "click[" * (MB // 6) + "</action>",
         ParsedAction("click[" * (MB // 6), well_formed=True, admissible=False)),
    ],
    ids=["text", "lt-spaces", "lt-space-pairs", "think-action", "thinks", "closes", "actions",
         "long-think", "long-action"],
)
def test_huge_replies_parse_in_linear_time(reply, expected):
    start = time.perf_counter()
    p = parse_reply(reply, SHOP, map_near_miss=True)
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0, f"{elapsed:.2f} s for {len(reply)} characters"
    if expected is None:  # no action found, nothing mapped
        assert p == ParsedAction(None, well_formed=False, admissible=False)
    else:
        assert p == expected


def test_huge_reply_with_a_valid_action():
    reply = "<think>" + "z" * MB + "</think><action>click[buy now]</action>"
    assert parse_reply(reply, SHOP) == ok("click[buy now]")


def test_huge_action_is_kept_but_not_mapped():
    action = "click[" + "a" * MB + "]"
    p = parse_reply(f"<think>t</think><action>{action}</action>", SHOP, map_near_miss=True)
    assert p.action == action and not p.admissible and p.mapped_from is None


# --- near misses ----------------------------------------------------------------------------

@pytest.mark.parametrize(
    "reply, actions, mapped",
    [
        ("<think>t</think><action>click[buy]</action>", SHOP, "click[buy now]"),
        ("<think>t</think><action>buy now</action>", SHOP, "click[buy now]"),
        ("<think>t</think><action>click[b0abc1234]</action>", SHOP, "click[b0abc12345]"),
        ("<think>t</think><action>'click[buy now]'</action>", SHOP, "click[buy now]"),
        ("<think>t</think><action>search red shoes</action>", SEARCH, "search[red shoes]"),
        ("<think>t</think><action>Search: red shoes</action>", SEARCH, "search[red shoes]"),
        ("<think>t</think><action>search[red shoes</action>", SEARCH, "search[red shoes]"),
        ("<think>t</think><action>go to countertop one</action>", HOUSE, "go to countertop 1"),
        ("<think>t</think><action>open the fridge 1</action>", HOUSE, "open fridge 1"),
        ("I will open fridge 1", HOUSE, "open fridge 1"),  # no tags: the text outside think
    ],
)
def test_near_miss_is_mapped_only_when_asked(reply, actions, mapped):
    plain = parse_reply(reply, actions)
    assert not plain.admissible and plain.mapped_from is None
    p = parse_reply(reply, actions, map_near_miss=True)
    assert p.action == mapped and p.admissible
    assert p.mapped_from is not None and p.mapped_from != mapped
    assert p.well_formed == plain.well_formed  # mapping never changes the format verdict


@pytest.mark.parametrize(
    "reply, actions",
    [
        ("<think>t</think><action>click[checkout]</action>", SHOP),
        ("<think>t</think><action>dance</action>", HOUSE),
        ("<think>t</think><action>search[<query>]</action>", SEARCH),
        ("<think>t</think><action>search</action>", SEARCH),
        ("", SHOP),
    ],
)
def test_far_misses_are_not_mapped(reply, actions):
    p = parse_reply(reply, actions, map_near_miss=True)
    assert not p.admissible and p.mapped_from is None


def test_exact_matches_are_not_near_misses():
    p = parse_reply("<think>t</think><action>CLICK[BUY NOW]</action>", SHOP, map_near_miss=True)
    assert p == ok("click[buy now]")


# --- helpers --------------------------------------------------------------------------------

def test_template_helpers():
    assert is_template("search[<query>]") and not is_template("click[< prev]")
    assert fill_template("search[<query>]", " red  shoes ") == "search[red shoes]"
    assert fill_template("click[buy now]", "x") == "click[buy now]"
    assert fills_template("SEARCH[shoes]", "search[<query>]")
    assert not fills_template("search[<query>]", "search[<query>]")
    assert match_admissible("Inventory ", HOUSE) == "inventory"
    assert match_admissible("dance", HOUSE) is None


def test_fast_path_agrees_with_the_full_parser(monkeypatch):
    """The shortcut for plain well-formed replies gives exactly the full walk's answer."""
    import random

    import gagpo.agents.parser as parser

    rng = random.Random(0)
    admissible = ["search[<query>]", "click[back to search]", "click[b09tk00k5u]",
                  "click[buy now]", "click[Large]", "go to cabinet 1"]
    pieces = ["<think>", "</think>", "<action>", "</action>", " ", "\n", "click[buy now]",
              "click[large]", "go to  cabinet 1", "search[red shoes]", "x", "<", "Click[Buy Now]"]
    replies = [f"<think>{t}</think><action>{a}</action>" for t in ("", "ok", " a b ")
               for a in admissible + ["click[ buy  now ]", "nothing", ""]]
    replies += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 9))) for _ in range(3000)]
    fast = [parser.parse_reply(r, admissible) for r in replies]
    monkeypatch.setattr(parser, "_SIMPLE_MAX_CHARS", 0)
    slow = [parser.parse_reply(r, admissible) for r in replies]
    assert fast == slow


# --- block boundaries, near-miss limits (each case a mutant once survived) ------------------

def test_an_unclosed_think_ends_at_the_next_action_tag():
    p = parse_reply("<think>I should buy it <action>click[buy now]</action>", SHOP)
    assert p == ParsedAction("click[buy now]", well_formed=False, admissible=True)
    # Stray tags inside the unclosed block are still reasoning: the <action> after them counts.
    p = parse_reply("<think>not </action> yet <action>click[buy now]</action>", SHOP)
    assert p == ParsedAction("click[buy now]", well_formed=False, admissible=True)


def test_an_unclosed_think_without_action_hides_everything_after_it():
    """Tags inside reasoning never end it early: no action is smuggled past a stray tag."""
    p = parse_reply("<think>I could say </action> buy now", SHOP, map_near_miss=True)
    assert p.action is None and not p.admissible


def test_text_outside_the_blocks_is_kept_whole_for_near_misses():
    # A leading "</think>" closes reasoning that began at the start of the reply: only what
    # follows it is the candidate, and the first character of the reply is not lost either.
    p = parse_reply("I should buy</think>buy now", SHOP, map_near_miss=True)
    assert (p.action, p.mapped_from, p.well_formed) == ("click[buy now]", "buy now", False)
    p = parse_reply("buy now <think>the size fits</think>", SHOP, map_near_miss=True)
    assert (p.action, p.mapped_from) == ("click[buy now]", "buy now")


def test_the_first_action_block_is_the_action_even_when_empty():
    for reply in ("<action></action><action>buy now</action>", "<action><action>buy now</action>",
                  "<action></action><action>click[buy now]</action>"):
        p = parse_reply(reply, SHOP, map_near_miss=True)
        assert p == ParsedAction(None, well_formed=False, admissible=False), reply


def test_a_template_suffix_matches_case_insensitively():
    assert fills_template("say hello World", "say <text> world")
    assert match_admissible("SAY hi WORLD", ["say <text> world"]) == "say hi world"


def test_a_template_whose_prefix_and_suffix_overlap_is_not_filled_by_nothing():
    assert not fills_template("ask '", "ask '<question>'")
    assert fills_template("ask 'why'", "ask '<question>'")


def test_near_miss_default_cutoff_is_80_and_a_given_cutoff_is_used():
    from rapidfuzz import fuzz

    assert fuzz.ratio("a buynow", "buy now") == 80.0  # exactly on the documented cutoff
    assert parse_reply("a buynow", SHOP, map_near_miss=True).action == "click[buy now]"
    assert nearest_admissible("a buynow", SHOP) == "click[buy now]"
    assert parse_reply("bye now", SHOP, map_near_miss=True).action == "click[buy now]"
    strict = parse_reply("bye now", SHOP, map_near_miss=True, near_miss_cutoff=90)
    assert strict.action is None and not strict.admissible


def test_template_near_misses_keep_the_query_and_the_verb():
    # Quotes around the whole reply go; the query's own letters stay (an "X" included).
    assert nearest_admissible("'search red shoes'", SEARCH) == "search[red shoes]"
    assert nearest_admissible("search XL shirts", SEARCH) == "search[XL shirts]"
    assert nearest_admissible("FIX the sink", ["FIX[<part>]"]) == "FIX[the sink]"
    # A template only takes texts that start with its verb: a bare "buy now" is a click.
    assert nearest_admissible("buy now", SEARCH + SHOP) == "click[buy now]"


def test_near_miss_edge_cases():
    assert nearest_admissible("buy now", []) is None
    assert nearest_admissible("  ", SHOP) is None
    # The longest action written whole wins, not the alphabetically last.
    assert nearest_admissible("look, then go to countertop 2", HOUSE) == "go to countertop 2"


def test_near_misses_are_only_sought_in_texts_of_bounded_length():
    longest = max(len(a) for a in HOUSE)
    limit = 3 * longest + 10  # the documented bound: longer texts are not near misses
    at_limit = "open fridge 1".ljust(limit, ".")
    assert nearest_admissible(at_limit, HOUSE) == "open fridge 1"
    assert nearest_admissible(at_limit + ".", HOUSE) is None


def test_a_reply_that_is_not_a_string_is_parsed_by_its_text():
    class Reply:
        def __str__(self) -> str:
            return "<think>t</think><action>click[buy now]</action>"

    assert parse_reply(Reply(), SHOP) == ok("click[buy now]")

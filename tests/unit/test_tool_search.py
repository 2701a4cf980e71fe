"""Tool search quality on a small fixture of our own, and the compact shape of list answers."""
from __future__ import annotations

import json

import pytest

from actors.catalogue import snapshot as catalogue
from actors.catalogue.terms import stem, terms
from actors.downstream import metatools


def _t(tool: str, description: str, **params: str) -> dict:
    return {"name": tool, "description": description,
            "inputSchema": {"type": "object", "properties": {k: {"type": "string", "description": v}
                                                             for k, v in params.items()}}}


SERVERS = {
    "filesystem": [
        _t("read_file", "Read the complete contents of a file from the file system.", path="Path of the file"),
        _t("write_file", "Create a new file or completely overwrite an existing file with new content.",
           path="Where to write", content="Text to write"),
        _t("list_directory", "Get a detailed listing of all files and directories in a specified path.",
           path="Directory path"),
        _t("move_file", "Move or rename files and directories.", source="From", destination="To"),
    ],
    "yahoo-finance": [
        _t("get_current_stock_price", "Get the current stock price based on stock symbol.",
           symbol="Stock symbol in Yahoo Finance format."),
        _t("get_historical_stock_prices", "Get historical stock prices for a given ticker symbol.",
           ticker="The ticker symbol", period="1d, 5d, 1mo, 1y"),
        _t("get_news", "Get news for a given stock symbol.", symbol="Stock symbol"),
    ],
    "weather": [
        _t("get_forecast", "Get weather forecast for a location.", latitude="Latitude", longitude="Longitude"),
        _t("get_alerts", "Get weather alerts for a US state.", state="Two-letter US state code"),
    ],
    "playwright": [
        _t("playwright_navigate", "Navigate to a URL in the browser.", url="URL to open"),
        _t("playwright_screenshot", "Take a screenshot of the current page or a specific element.",
           name="Name for the screenshot"),
        _t("playwright_click", "Click an element on the page.", selector="CSS selector"),
    ],
    "office-word": [
        _t("create_document", "Create a new Word document with optional metadata.", filename="Document name"),
        _t("add_paragraph", "Add a paragraph to a Word document.", filename="Document", text="Paragraph text"),
        _t("convert_to_pdf", "Convert a Word document to PDF format.", filename="Document"),
    ],
    "maps": [
        _t("geocode_address", "Convert an address into geographic coordinates.", address="The address"),
        _t("getRouteDirections", "Get driving directions between two places.", origin="Start", destination="End"),
    ],
    "git": [
        _t("git_commit", "Records changes to the repository.", repo_path="Repository", message="Commit message"),
        _t("git_diff_unstaged", "Shows changes in the working directory that are not yet staged.",
           repo_path="Repository"),
    ],
}

# (task as a model would pass it, a tool it needs): each must be in the top 3.
CASES = [
    ("Save the summary as Markdown to /root/notes/summary.md", "filesystem__write_file"),
    ("What files are in my /root/music folder?", "filesystem__list_directory"),
    ("Tell me the price of nvidia's stock right now.", "yahoo-finance__get_current_stock_price"),
    ("How did Apple's stock price move over the past year?", "yahoo-finance__get_historical_stock_prices"),
    ("Will it rain in Seattle tomorrow? Give me the forecast.", "weather__get_forecast"),
    ("Open example.com in a browser and take a screenshot of the page", "playwright__playwright_screenshot"),
    ("Write a report as a Word document and convert it to PDF", "office-word__convert_to_pdf"),
    ("Create a Word document titled Plans with two paragraphs", "office-word__create_document"),
    ("Give me driving directions from Tokyo Tower to Shinjuku Gyoen", "maps__getRouteDirections"),
    ("Find the coordinates of this address: 1 Infinite Loop", "maps__geocode_address"),
    ("Commit my changes to the repository with a message", "git__git_commit"),
    ("Rename report.txt to final.txt", "filesystem__move_file"),
]


def _cat():
    return catalogue.build({s: catalogue.ServerLists(s, s, tuple(tools)) for s, tools in SERVERS.items()}, "__", 1)


def _ranked(cat, query: str, limit: int = 10) -> list[str]:
    result = metatools.handle("filter_tools", {"query": query, "limit": limit}, cat)
    return [t["name"] for t in json.loads(result["content"][0]["text"])["tools"]]


@pytest.mark.parametrize(("query", "expected"), CASES)
def test_the_tool_a_task_needs_is_in_the_top_3(query, expected):
    top = _ranked(_cat(), query)[:3]
    assert expected in top, f"{query!r}: top 3 {top}"


def test_ranking_is_deterministic_and_keeps_no_state_between_queries():
    first, second = _cat(), _cat()
    alone = _ranked(first, "stock price history")
    for query, _ in CASES:  # other queries on the same index first
        _ranked(second, query)
    assert _ranked(second, "stock price history") == alone == _ranked(first, "stock price history")


def test_terms_split_camel_and_snake_case_drop_stop_words_and_stem():
    assert terms("getRouteDirections") == terms("get_route_directions") == ["get", "rout", "direction"]
    assert terms("the prices of the files") == ["pric", "fil"]
    assert stem("running") == stem("run") and stem("created") == stem("create") == stem("creating")


def test_list_answers_are_compact_with_a_bounded_first_sentence():
    long = "Search the web. " + "Then more detail about options " * 20
    tools = [_t(f"tool{i}", long if i == 0 else "A " + "very " * 60 + "long sentence.") for i in range(12)]
    cat = catalogue.build({"s": catalogue.ServerLists("s", "s", tuple(tools))}, "__", 1)
    for name, args in (("list_tools", {"limit": 10}), ("filter_tools", {"query": "long search", "limit": 10})):
        text = metatools.handle(name, args, cat)["content"][0]["text"]
        assert "\n" not in text and ": " not in text  # no indentation, no padding
        answer = json.loads(text)
        assert len(answer["tools"]) == 10 and answer["total"] == 12
        assert all(len(t["description"]) <= metatools.BRIEF_CHARS for t in answer["tools"])
        assert set(answer["tools"][0]) >= {"name", "server", "description"}
    first = json.loads(metatools.handle("list_tools", {"limit": 1}, cat)["content"][0]["text"])["tools"][0]
    assert first["description"] == "Search the web."
    described = json.loads(metatools.handle("describe_tool", {"name": "s__tool0"}, cat)["content"][0]["text"])
    assert described["tool"]["description"] == long  # the whole definition is one call away


def test_brief_cuts_at_a_word():
    assert metatools.brief("One. Two.") == "One."
    assert metatools.brief("First paragraph without a stop\n\nSecond") == "First paragraph without a stop"
    cut = metatools.brief("word " * 100)
    assert cut.endswith("…") and len(cut) <= metatools.BRIEF_CHARS and not cut[:-1].endswith(" ")

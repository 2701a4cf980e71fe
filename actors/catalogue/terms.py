"""Search terms from text: camelCase and snake_case split, stop words dropped, light stemming."""
from __future__ import annotations

import re
from functools import lru_cache

_TOKEN = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# Words that say nothing about which tool a task needs; a query is a whole task, so it is full of them.
STOP = frozenset("""a an and are as at be been being but by can could do does for from has have how i if in
into is it its me my of on or our please should so some than that the their them then there these this
those to us via was we were what when where which while who will with would you your""".split())


# Everyday words a task uses for what tool texts name otherwise; both sides map to one term.
# Kept to general computing vocabulary (not fitted to any benchmark's tools).
SAME = {"save": "write", "store": "write", "folder": "directory", "dir": "directory", "rename": "move",
        "remove": "delete", "erase": "delete", "find": "search", "lookup": "search", "picture": "image",
        "photo": "image", "doc": "document", "website": "web", "webpage": "web", "site": "web",
        "browse": "navigate", "visit": "navigate", "open": "navigate"}


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Strip common English inflections so 'prices', 'priced' and 'price' meet (not a full
    Porter stemmer: deterministic, cheap, and wrong only in ways that hurt both sides equally)."""
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":  # running -> runn -> run
        word = word[:-1]
    return word


def terms(text: str) -> list[str]:
    """The search terms of a name, description or query, in order."""
    words = _TOKEN.findall(_CAMEL.sub(" ", text or "").lower())
    return [stem(SAME.get(w, w)) for w in words if w not in STOP]

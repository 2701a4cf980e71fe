"""Fielded BM25 ranking of catalogue tools, blended with a ranking of their servers."""
from __future__ import annotations

import math
from collections import Counter
from typing import cast

from actors.catalogue.terms import terms

K1, B = 1.2, 0.75
# Field weights (BM25F-style: a weighted bag per tool, one length norm). A query word in the
# tool's own name says most; a parameter's name or description says less than the description.
FIELDS = {"name": 3.0, "title": 2.0, "description": 1.0, "params": 0.5, "server": 1.0}
# Share of a tool's score that comes from its server's score: a task worded in the server's
# vocabulary ("a deep report") reaches tools whose own text misses those words.
SERVER_SHARE = 0.5


def fields(entry, instructions: str = "") -> dict[str, str]:
    """A catalogue Entry's searchable text, per field; `instructions` is its server's, when known
    (the catalogue does not carry them yet)."""
    d = entry.definition
    props = ((d.get("inputSchema") or {}).get("properties") or {})
    params = " ".join(f"{k} {v.get('description', '') if isinstance(v, dict) else ''}" for k, v in props.items())
    return {"name": entry.original, "title": d.get("title") or "", "description": d.get("description") or "",
            "params": params, "server": entry.server, "instructions": instructions, "key": entry.name}


def _bm25(bags: list[dict[str, float]]) -> dict[str, tuple[list, list]]:
    """Per term: doc ids and each doc's BM25 term weight (idf applied at query time)."""
    lengths = [sum(b.values()) or 1.0 for b in bags]
    avg = (sum(lengths) / len(lengths)) if lengths else 1.0
    postings: dict[str, tuple[list, list]] = {}
    for i, bag in enumerate(bags):
        norm = K1 * (1 - B + B * lengths[i] / avg)
        for term, tf in bag.items():
            ids, weights = postings.setdefault(term, ([], []))
            ids.append(i)
            weights.append(tf * (K1 + 1) / (tf + norm))
    return postings


def _score(postings: dict[str, tuple[list, list]], size: int, query: set[str]) -> dict[int, float]:
    scores: dict[int, float] = {}
    for term in query:
        posting = postings.get(term)
        if not posting:
            continue
        ids, weights = posting
        idf = math.log(1 + (size - len(ids) + 0.5) / (len(ids) + 0.5))
        if not scores:  # the first term builds the map in C
            scores = dict(zip(ids, [idf * w for w in weights]))
            continue
        get = scores.get
        for i, w in zip(ids, weights):
            scores[i] = get(i, 0.0) + idf * w
    return scores


class Index:
    """Built once per catalogue snapshot from each tool's `fields`; a query touches only the
    tools and servers that hold one of its terms. Deterministic and stateless per query."""

    def __init__(self, docs: list[dict[str, str]]):
        self.size = len(docs)
        bags = []
        server_of: list[int] = []
        server_ids: dict[str, int] = {}
        server_bags: list[Counter] = []
        for doc in docs:
            bag = cast("dict[str, float]", Counter())  # float weights: the stub says Counter counts ints
            for field, weight in FIELDS.items():
                for t in terms(doc.get(field, "")):
                    bag[t] += weight
            bags.append(bag)
            sid = server_ids.setdefault(doc.get("server", ""), len(server_ids))
            if sid == len(server_bags):  # first tool of its server: the server's name and instructions
                server_bags.append(Counter(terms(f"{doc.get('server', '')} {doc.get('instructions', '')}")))
            server_of.append(sid)
            # A server's text is its tools' names and descriptions, each word counted once per tool
            # so one verbose tool does not speak for the server.
            server_bags[sid].update(set(terms(f"{doc.get('name', '')} {doc.get('description', '')}")))
        self.postings = _bm25(bags)
        self.server_postings = _bm25(cast("list[dict[str, float]]", server_bags))
        self.servers = len(server_bags)
        self.server_of = server_of
        # Each doc's position in name order, for a cheap deterministic tie-break.
        order = sorted(range(len(docs)), key=lambda i: docs[i].get("key", docs[i].get("name", "")))
        self.name_rank = [0] * len(docs)
        for rank, i in enumerate(order):
            self.name_rank[i] = rank

    def score(self, query: str) -> dict[int, float]:
        words = set(terms(query))
        scores = _score(self.postings, self.size, words)
        if not scores or self.servers < 2:
            return scores
        by_server = _score(self.server_postings, self.servers, words)
        top = max(by_server.values(), default=0.0)
        best = max(scores.values())
        if top <= 0:
            return scores
        # Normalised so the server's part never outweighs the tool's own best match.
        scale = SERVER_SHARE * best / top
        of = self.server_of
        return {i: s + scale * by_server.get(of[i], 0.0) for i, s in scores.items()}

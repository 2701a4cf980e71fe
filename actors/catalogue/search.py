"""BM25-style ranking of catalogue entries, name matches weighted above descriptions."""
from __future__ import annotations

import math
import re
from collections import Counter
from typing import cast

_TOKEN = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
K1, B = 1.2, 0.75
NAME_WEIGHT = 3.0  # a query word in the tool's name says more than one in its description


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(_CAMEL.sub(" ", text or "").lower())


class Index:
    """Built once per catalogue snapshot; scoring a query touches only matching docs."""

    def __init__(self, docs: list[tuple[str, str]]):  # (name, description)
        self.size = len(docs)
        bags, lengths = [], []
        for name, desc in docs:
            bag = cast("dict[str, float]", Counter())  # float weights: the stub says Counter counts ints
            for t in tokens(name):
                bag[t] += NAME_WEIGHT
            for t in tokens(desc):
                bag[t] += 1.0
            bags.append(bag)
            lengths.append(sum(bag.values()) or 1.0)
        avg = (sum(lengths) / len(lengths)) if lengths else 1.0
        # Per term: the doc ids and each doc's BM25 term weight, precomputed so a query
        # costs one multiply-add per matching doc.
        postings: dict[str, tuple[list, list]] = {}
        for i, bag in enumerate(bags):
            norm = K1 * (1 - B + B * lengths[i] / avg)
            for term, tf in bag.items():
                ids, weights = postings.setdefault(term, ([], []))
                ids.append(i)
                weights.append(tf * (K1 + 1) / (tf + norm))
        self.postings = postings
        # Each doc's position in name order, for a cheap deterministic tie-break.
        order = sorted(range(len(docs)), key=lambda i: docs[i][0])
        self.name_rank = [0] * len(docs)
        for rank, i in enumerate(order):
            self.name_rank[i] = rank

    def score(self, query: str) -> dict[int, float]:
        scores: dict[int, float] = {}
        for term in set(tokens(query)):
            posting = self.postings.get(term)
            if not posting:
                continue
            ids, weights = posting
            idf = math.log(1 + (self.size - len(ids) + 0.5) / (len(ids) + 0.5))
            if not scores:  # the first term builds the map in C
                scores = dict(zip(ids, [idf * w for w in weights]))
                continue
            get = scores.get
            for i, w in zip(ids, weights):
                scores[i] = get(i, 0.0) + idf * w
        return scores

"""BM25-style ranking of catalogue entries, name matches weighted above descriptions."""
from __future__ import annotations

import math
import re
from collections import Counter

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
        self.postings: dict[str, list[tuple[int, float]]] = {}
        lengths = []
        bags = []
        for name, desc in docs:
            bag = Counter()
            for t in tokens(name):
                bag[t] += NAME_WEIGHT
            for t in tokens(desc):
                bag[t] += 1.0
            bags.append(bag)
            lengths.append(sum(bag.values()) or 1.0)
        self.avg = (sum(lengths) / len(lengths)) if lengths else 1.0
        self.lengths = lengths
        for i, bag in enumerate(bags):
            for term, tf in bag.items():
                self.postings.setdefault(term, []).append((i, tf))

    def score(self, query: str) -> dict[int, float]:
        scores: dict[int, float] = {}
        for term in set(tokens(query)):
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (self.size - len(posting) + 0.5) / (len(posting) + 0.5))
            for i, tf in posting:
                norm = tf * (K1 + 1) / (tf + K1 * (1 - B + B * self.lengths[i] / self.avg))
                scores[i] = scores.get(i, 0.0) + idf * norm
        return scores

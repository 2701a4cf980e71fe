"""The figures table and JSON of scripts/bench.py: rows with their ratio to a baseline and their target."""
from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field


@dataclass
class Row:
    section: str
    path: str
    figure: str
    ratio: str = ""
    target: str = ""
    met: bool | None = None


@dataclass
class Report:
    """Every row printed and every figure written, keyed by section."""

    rows: list[Row] = field(default_factory=list)
    sections: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Other work on the machine skews every figure: the load says how quiet the run was.
    load_at_start: tuple = field(default_factory=os.getloadavg)

    def row(self, section: str, path: str, figure: str, ratio: str = "", target: str = "",
            met: bool | None = None) -> None:
        self.rows.append(Row(section, path, figure, ratio, target, met))
        print(f"  {path:<34} {figure:<30} {ratio}", flush=True)

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  note: {text}", flush=True)

    def table(self) -> str:
        head = ("section", "path", "figure", "ratio vs baseline", "target", "met")
        lines = [(r.section, r.path, r.figure, r.ratio, r.target,
                  "" if r.met is None else ("met" if r.met else "NOT MET")) for r in self.rows]
        widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(head)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        out = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
        last = None
        for line in lines:
            out.append(fmt.format(*((line[0] if line[0] != last else ""),) + line[1:]))
            last = line[0]
        return "\n".join(out)

    def as_json(self, args: dict) -> dict:
        return {"generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "machine": {"python": platform.python_version(), "platform": platform.platform(),
                            "cpus": _cpus(), "loadavg_at_start": self.load_at_start, "loadavg_at_end": os.getloadavg()},
                "args": args, "sections": self.sections,
                "rows": [r.__dict__ for r in self.rows], "notes": self.notes}


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


def ms(value: float) -> str:
    return f"{value:.3f} ms" if value < 10 else f"{value:.1f} ms"


def ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")

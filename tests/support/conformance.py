"""The official MCP conformance suite in server mode, run as a child process, its results read back.

Two releases are installed side by side (.ci/run): the `latest` tag (0.1.16) in the peers directory
itself, and the 0.2 alpha line, which holds the frozen 2026-07-28 requirement set, in its own prefix
(NEXT). Both need Node 22, which .ci/run installs next to them.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.support import PEERS

NODE22 = PEERS / "node22" / "node_modules" / ".bin"
NEXT = PEERS / "conformance-next"  # npm prefix of the 0.2 alpha (`latest` stays 0.1.16)
NEXT_VERSION = "0.2.0-alpha.12"
RUN_TIMEOUT = 600  # seconds for one whole run; a scenario has its own 30 s timeout inside the suite
PASSED = "SUCCESS"
_PACKAGE = Path("node_modules") / "@modelcontextprotocol" / "conformance"
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")  # the timestamp the suite appends to a result directory


@dataclass
class Report:
    """One run: each check's status keyed by (scenario, check id), where an id a scenario repeats
    (one per probed header, say) is numbered from its second occurrence on (`id#2`, `id#3`…), so
    every occurrence is compared, not just the last; plus the suite's closing summary text."""

    checks: dict[tuple[str, str], str] = field(default_factory=dict)
    summary: str = ""

    @property
    def scenarios(self) -> set[str]:
        return {scenario for scenario, _ in self.checks}

    def passed(self) -> set[tuple[str, str]]:
        return {key for key, status in self.checks.items() if status == PASSED}

    def of(self, scenario: str) -> dict[str, str]:
        """The checks of one scenario: check id → status."""
        return {check: status for (s, check), status in self.checks.items() if s == scenario}


def _suite(prefix: Path) -> str:
    path = prefix / "node_modules" / ".bin" / "conformance"
    if not path.exists():
        raise AssertionError(f"the conformance suite is not installed at {path}: run .ci/run")
    return str(path)


def installed_version(prefix: Path) -> str:
    """The version of the suite installed under npm prefix `prefix`."""
    return json.loads((prefix / _PACKAGE / "package.json").read_text())["version"]


def required_server_scenarios(prefix: Path, revision: str) -> list[str]:
    """The server scenarios a spec revision requires, from the frozen requirement set the suite ships."""
    return list(yaml.safe_load((prefix / _PACKAGE / "requirements" / f"{revision}.yaml").read_text())["server"])


def extension_scenarios(prefix: Path, extension: str) -> list[str]:
    """The server scenarios of one extension (`io.modelcontextprotocol/tasks`, say), read from the
    suite's bundle: the CLI selects scenarios only one by one (`--scenario`), or by suites that mix
    extensions with other pending work, so the bundle is where an extension's set is named."""
    bundle = (prefix / _PACKAGE / "dist" / "index.js").read_text()
    found = re.findall(r"this\.name=`([a-z0-9-]+)`,this\.source=\{extensionId:`" + re.escape(extension) + "`", bundle)
    return list(dict.fromkeys(found))


def run_scenarios(url: str, out: Path, prefix: Path, scenarios: list[str], *args: str) -> Report:
    """`run_server` once per scenario (`--scenario`, each its own process and output directory),
    the results merged into one Report whose summary is each scenario's tally line."""
    merged = Report()
    for scenario in scenarios:
        report = run_server(url, out / scenario, prefix, "--scenario", scenario, *args)
        merged.checks.update(report.checks)
        tally = [line for line in report.summary.splitlines() if line.startswith("Passed: ")]
        merged.summary += f"{scenario}: {tally[-1] if tally else report.summary[-300:]}\n"
    return merged


def run_server(url: str, out: Path, prefix: Path = PEERS, *args: str) -> Report:
    """Run the suite installed under `prefix` against the MCP server at `url` (extra CLI `args`,
    such as `--requirements 2026-07-28`); the results are kept under `out`. A run that produced
    no check at all fails here: an empty report must never read as "nothing failed"."""
    if not (NODE22 / "node").exists():
        raise AssertionError(f"Node 22 not installed at {NODE22}: run .ci/run")
    env = {**os.environ, "PATH": f"{NODE22}:{os.environ['PATH']}"}
    proc = subprocess.run([_suite(prefix), "server", "--url", url, "-o", str(out), *args], env=env,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    report = Report(summary=proc.stdout[proc.stdout.find("=== SUMMARY"):] if "=== SUMMARY" in proc.stdout
                    else proc.stdout[-3000:])
    for scenario_dir in sorted(out.iterdir()) if out.exists() else ():
        scenario = _STAMP.sub("", scenario_dir.name.removeprefix("server-"))
        seen: dict[str, int] = {}
        for check in json.loads((scenario_dir / "checks.json").read_text()):
            seen[check["id"]] = seen.get(check["id"], 0) + 1
            key = check["id"] if seen[check["id"]] == 1 else f"{check['id']}#{seen[check['id']]}"
            report.checks[(scenario, key)] = check["status"]
    assert report.checks, f"the conformance suite ran no scenario:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return report

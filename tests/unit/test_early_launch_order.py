"""troupe's entry point launches the config's stdio servers before it loads the rest of itself
(actors/main.py, supervision/early_start.py): reading the config and launching must need neither
loguru nor the catalogue's machinery, or the servers start ~40 ms later and, with many of them, the
second core waits idle meanwhile."""
from __future__ import annotations

import sys

from tests.support.fresh import run_fresh

HEAVY = ("loguru", "actors.catalogue.snapshot", "actors.catalogue.views", "actors.runtime", "pykka", "orjson")


def test_the_config_is_read_and_its_servers_launched_before_logging_and_the_catalogue_load(tmp_path):
    config = tmp_path / "troupe.yaml"
    config.write_text("discovery: {enabled: false}\n"
                      "servers:\n"
                      f"  - name: echo\n    transport: {{type: stdio, stdio: {{command: {sys.executable}, "
                      "args: ['-c', 'import sys; sys.stdin.read()']}}\n")
    got = run_fresh("import json, sys\n"
                    "from actors import main  # patches, then imports only what reading the config needs\n"
                    "loaded_with_main = sorted(m for m in " + repr(HEAVY) + " if m in sys.modules)\n"
                    "from actors.settings import config as config_mod\n"
                    "from actors.supervision import early_start\n"
                    "from actors.trust import ledger\n"
                    f"config = config_mod.load({str(config)!r})\n"
                    "early = early_start.start(config, ledger.path_for(config))\n"
                    "launched = len(early)\n"
                    "loaded_by_launch = sorted(m for m in " + repr(HEAVY) + " if m in sys.modules)\n"
                    "early.discard_rest(wait=5.0)\n"
                    "print(json.dumps({'main': loaded_with_main, 'launch': loaded_by_launch, 'launched': launched}))\n",
                    env={"TROUPE_CONFIG_DIR": str(tmp_path / "state"), "HOME": str(tmp_path)})
    assert got == {"main": [], "launch": ["orjson"], "launched": 1}  # orjson: the approvals file's reader

"""troupe's start patching (actors/patching.py, actors/loguru_without_asyncio.py): gevent's patches
as patch_all makes them, its plugins called, ssl patched when first imported, loguru without
asyncio. Each case runs in a fresh interpreter: patching is process-wide."""
from __future__ import annotations

import zipfile

from actors import patching
from tests.support.fresh import run_fresh


_run = run_fresh


def test_ssl_is_left_unloaded_and_patched_by_gevent_when_first_imported():
    got = _run("import json, sys\n"
               "from actors import patching\n"
               "patching.patch_all()\n"
               "from gevent import monkey\n"
               "before = {m: m in sys.modules for m in ('ssl', '_ssl', 'importlib.metadata')}\n"
               "threads = monkey.is_module_patched('threading') and monkey.is_module_patched('socket')\n"
               "import ssl, gevent.ssl\n"
               "print(json.dumps({'before': before, 'threads': threads, 'patched': monkey.is_module_patched('ssl'),\n"
               "  'context': ssl.SSLContext is gevent.ssl.SSLContext, 'wrap': ssl.SSLSocket is gevent.ssl.SSLSocket,\n"
               "  'finders': [type(f).__name__ for f in sys.meta_path]}))\n")
    assert got["before"] == {"ssl": False, "_ssl": False, "importlib.metadata": False}
    assert got["threads"] and got["patched"] and got["context"] and got["wrap"]
    assert "_PatchSslOnImport" not in got["finders"]  # inert once ssl is in


def test_ssl_imported_by_a_library_in_a_worker_thread_is_cooperative():
    # optional_imports.load imports requests (and so ssl) in gevent's threadpool.
    got = _run("import json\n"
               "from actors import patching\n"
               "patching.patch_all()\n"
               "from actors import optional_imports\n"
               "import gevent\n"
               "urllib3 = gevent.spawn(optional_imports.load, 'urllib3.util.ssl_').get(timeout=30)\n"
               "import ssl, gevent.ssl\n"
               "ctx = urllib3.create_urllib3_context()\n"
               "print(json.dumps({'context': type(ctx).__module__, 'same': ssl.SSLContext is gevent.ssl.SSLContext}))\n")
    assert got == {"context": "gevent.ssl", "same": True}


def test_gevent_ssl_imported_before_ssl_patches_it_too():
    got = _run("import json\n"
               "from actors import patching\n"
               "patching.patch_all()\n"
               "import gevent.ssl, ssl\n"
               "from gevent import monkey\n"
               "print(json.dumps({'patched': monkey.is_module_patched('ssl'),\n"
               "                  'context': ssl.SSLContext is gevent.ssl.SSLContext}))\n")
    assert got == {"patched": True, "context": True}


def test_an_app_that_imported_ssl_first_still_gets_it_patched():
    got = _run("import json, ssl\n"
               "from actors import patching\n"
               "patching.patch_all()\n"
               "from gevent import monkey\n"
               "print(json.dumps({'patched': monkey.is_module_patched('ssl')}))\n")
    assert got == {"patched": True}


def _dist(root, name: str, entry_points: str):
    dist = root / f"{name}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "entry_points.txt").write_text(entry_points)
    return dist


def test_declared_plugins_are_read_from_entry_points_files(tmp_path):
    _dist(tmp_path, "plugged", "[console_scripts]\nx = a:b\n\n[gevent.plugins.monkey.will_patch_all]\n"
                               "mine = plugged.hooks:Sub.will [extra]\n; a comment = no\n")
    _dist(tmp_path, "plain", "[console_scripts]\ny = c:d\n")
    assert patching.declared_plugins([str(tmp_path)]) == {
        "gevent.plugins.monkey.will_patch_all": ["plugged.hooks:Sub.will [extra]"]}
    assert patching.declared_plugins([str(tmp_path / "missing")]) == {}


def test_a_zip_on_the_path_means_the_full_metadata_lookup(tmp_path):
    archive = tmp_path / "lib.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("m.py", "")
    assert patching.declared_plugins([str(archive)]) is None


def test_gevent_plugins_are_called_for_each_event_as_gevent_calls_them(tmp_path):
    (tmp_path / "plugged_hooks.py").write_text(
        "import os\nSEEN = []\n"
        "class Sub:\n    @staticmethod\n    def will(event):\n        SEEN.append(type(event).__name__)\n"
        "def did(event):\n    SEEN.append('did:' + event.module_name)\n")
    _dist(tmp_path, "plugged", "[gevent.plugins.monkey.will_patch_all]\nw = plugged_hooks:Sub.will\n"
                               "[gevent.plugins.monkey.did_patch_module]\nd = plugged_hooks:did\n")
    got = _run("import json\n"
               "from actors import patching\n"
               "patching.patch_all()\n"
               "import ssl, plugged_hooks\n"
               "print(json.dumps(plugged_hooks.SEEN))\n", str(tmp_path))
    assert got[0] == "GeventWillPatchAllEvent"
    assert "did:socket" in got and "did:threading" in got
    assert got[-1] == "did:ssl"  # the patch made at first import announces itself too


def test_loguru_loads_without_asyncio_and_a_coroutine_sink_still_works():
    got = _run("import json, sys\n"
               "from actors import loguru_without_asyncio\n"
               "loguru_without_asyncio.install()\n"
               "from loguru import logger\n"
               "loaded = 'asyncio' in sys.modules\n"
               "logger.remove()\n"
               "seen = []\n"
               "async def sink(message):\n    seen.append(message.record['message'])\n"
               "import asyncio\n"
               "async def main():\n"
               "    logger.add(sink)\n"
               "    logger.info('through the loop')\n"
               "    await logger.complete()\n"
               "asyncio.run(main())\n"
               "print(json.dumps({'asyncio_at_import': loaded, 'seen': seen}))\n")
    assert got == {"asyncio_at_import": False, "seen": ["through the loop"]}


def test_loguru_already_loaded_keeps_its_own_loop_functions():
    got = _run("import json, sys, loguru\n"
               "from actors import loguru_without_asyncio\n"
               "loguru_without_asyncio.install()\n"
               "print(json.dumps(sys.modules['loguru._asyncio_loop'].__doc__ == loguru_without_asyncio.__doc__))\n")
    assert got is False

"""A launch line's identity (trust.identity_key) is read from the file system once per second at
most: asked again within IDENTITY_FRESH_S it is reused; after it, or for another command, another
PATH or other arguments, it is read again."""
from __future__ import annotations

from actors.discovery import identity as identity_mod
from actors.settings.config import ServerConfig, StdioSpec
from actors.trust import provenance


def _server(command: str = "/bin/cat", *args: str) -> ServerConfig:
    return ServerConfig("s", "stdio", stdio=StdioSpec(command, args))


def test_the_identity_is_reused_within_the_window_and_read_again_after(monkeypatch):
    reads = []
    real = identity_mod.identity_of
    monkeypatch.setattr(identity_mod, "identity_of", lambda config, which=None: reads.append(1) or real(config, which))
    monkeypatch.setattr(provenance, "_recent", {})
    clock = [100.0]
    monkeypatch.setattr(provenance.time, "monotonic", lambda: clock[0])
    first = provenance.identity_key(_server())
    assert provenance.identity_key(_server()) == first and len(reads) == 1
    clock[0] += provenance.IDENTITY_FRESH_S
    assert provenance.identity_key(_server()) == first and len(reads) == 2  # the window is over
    provenance.identity_key(_server("/bin/cat", "-n"))
    monkeypatch.setenv("PATH", "/nowhere")
    provenance.identity_key(_server())
    assert len(reads) == 4  # other arguments, another PATH: read again
    given = ServerConfig("u", "stdio", stdio=StdioSpec("/bin/cat"), identity="stdio:x")
    assert provenance.identity_key(given) == "stdio:x" and len(reads) == 4

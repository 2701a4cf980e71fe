"""hashing_without_openssl: hashlib and hmac on Python's own hash modules, OpenSSL left unloaded.

hashlib prefers OpenSSL's implementations: its first import maps libcrypto, ~3.4 MiB of RSS in
every troupe, though troupe hashes only small things (tool definitions' digests, cache keys,
HMACs of request state) with sha256, sha1 and blake2b, which Python also builds in (_sha256,
_sha1, _blake2). `install`, before anything imports hashlib, has hashlib and hmac take those:
the same digests, the same constant-time compare. OpenSSL still loads with ssl, for an HTTPS
server, and then only ssl uses it. Nothing troupe runs needs what only OpenSSL has
(pbkdf2_hmac, scrypt). An interpreter built without one of those builtins keeps OpenSSL's hashlib.
"""
from __future__ import annotations

import sys

NEEDED = ("sha256", "sha1", "blake2b")  # what troupe hashes with


def install() -> None:
    """Import hashlib and hmac without OpenSSL's _hashlib, unless one of them is loaded already."""
    if any(name in sys.modules for name in ("hashlib", "hmac", "_hashlib")):
        return
    sys.modules["_hashlib"] = None  # type: ignore[assignment]  # "import _hashlib" fails: hashlib falls back
    try:
        import hashlib
        import hmac  # noqa: F401
    finally:
        del sys.modules["_hashlib"]  # nothing else is held back
    if not all(hasattr(hashlib, name) for name in NEEDED):  # an interpreter built without them: OpenSSL's
        for name in ("hashlib", "hmac"):
            sys.modules.pop(name, None)
        import hashlib  # noqa: F811,F401
        import hmac  # noqa: F811,F401

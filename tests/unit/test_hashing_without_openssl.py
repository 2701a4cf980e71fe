"""hashlib and hmac on Python's builtin hash modules (actors/hashing_without_openssl.py): the same
digests and HMACs as OpenSSL's, OpenSSL unmapped until ssl itself is imported, and nothing
changed for a process that had hashlib already. Each case runs in a fresh interpreter."""
from __future__ import annotations

import hashlib
import hmac

from tests.support.fresh import run_fresh

PROBE = ("import json, sys\n"
         "def mapped():\n"
         "    return any('libcrypto' in line for line in open('/proc/self/maps'))\n"
         "def sums():\n"
         "    import hashlib, hmac\n"
         "    return [hashlib.sha256(b'troupe').hexdigest(), hashlib.sha1(b'troupe').hexdigest(),\n"
         "            hashlib.blake2b(b'troupe', digest_size=16).hexdigest(),\n"
         "            hmac.new(b'key', b'state', 'sha256').hexdigest(), hmac.compare_digest(b'a', b'a')]\n")


def _run(body: str) -> dict:
    return run_fresh(PROBE + body)


EXPECTED = [hashlib.sha256(b"troupe").hexdigest(), hashlib.sha1(b"troupe").hexdigest(),
            hashlib.blake2b(b"troupe", digest_size=16).hexdigest(),
            hmac.new(b"key", b"state", "sha256").hexdigest(), True]  # this process: OpenSSL's


def test_the_same_digests_without_openssl_until_ssl_is_imported():
    got = _run("from actors import hashing_without_openssl\n"
               "hashing_without_openssl.install()\n"
               "before = sums()\n"
               "state = {'before': before, 'mapped': mapped(), 'held': '_hashlib' in sys.modules}\n"
               "import ssl\n"
               "state.update(after=sums(), mapped_with_ssl=mapped())\n"
               "print(json.dumps(state))\n")
    assert got["before"] == EXPECTED and got["after"] == EXPECTED
    assert got["mapped"] is False and got["held"] is False  # and nothing is left blocked
    assert got["mapped_with_ssl"] is True


def test_a_process_with_hashlib_already_keeps_it():
    got = _run("import hashlib\n"
               "from actors import hashing_without_openssl\n"
               "hashing_without_openssl.install()\n"
               "print(json.dumps({'sums': sums(), 'openssl': '_hashlib' in sys.modules}))\n")
    assert got == {"sums": EXPECTED, "openssl": True}


def test_an_interpreter_without_a_builtin_hash_keeps_openssl_s_hashlib():
    got = _run("sys.modules['_sha256'] = None  # as a build with only some builtin hashes\n"
               "from actors import hashing_without_openssl\n"
               "hashing_without_openssl.install()\n"
               "del sys.modules['_sha256']\n"
               "print(json.dumps({'sums': sums(), 'openssl': '_hashlib' in sys.modules}))\n")
    assert got == {"sums": EXPECTED, "openssl": True}

"""Operator acts in the audit trail: recorded by the running troupe (its HTTP routes, the embedding
API, the OAuth callback) through its Observer, or by a CLI command straight into the file its
config names (`troupe approve NAME` works on the approvals file; the troupe that reloads it cannot
tell who wrote it)."""
from __future__ import annotations

import getpass
import sys
import time

import orjson

from actors.ops.audit_file import AuditFile
from actors.ops.records import ActRecord

CLI, HTTP, EMBEDDED, OAUTH, MCP = "cli", "http", "embedded", "oauth", "mcp"  # an act's `via`
OPERATOR = "operator"  # `by` of an HTTP act authorised by serve.auth_token, the operator's own


def record(observer, act: str, server: str, by: str | None, via: str) -> None:
    """An act done in this troupe; nothing without an audit trail."""
    if observer is not None:
        observer.act(act, server, by, via)


def http_actor(environ, token_set: bool) -> str | None:
    """Who did an HTTP act: the serve.clients name its token carries; else, when serve.auth_token
    is set (the request passed the guard with it), the operator; else nobody troupe can tell."""
    from actors.serve.security import CLIENT_KEY
    client = environ.get(CLIENT_KEY)
    if client is not None:
        return client.name
    return OPERATOR if token_set else None


def cli_user() -> str | None:
    """The user running a CLI command (None when the system cannot say)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def record_offline(config_file: str | None, act: str, server: str) -> None:
    """A CLI command's act, appended to the audit file the config `config_file` names (None: the
    embedded default, which names none). A config that no longer loads, or a file that cannot be
    written, costs the line, said on stderr, never the command's own result."""
    from actors.settings import config as config_mod
    try:
        config = config_mod.load(config_file)
    except config_mod.ConfigError:
        print(f"troupe: audit: {config_file} does not load; the {act} of {server} is not in the audit trail",
              file=sys.stderr)
        return
    audit = config.audit
    if audit is None:
        return
    instance = config.cluster.instance if config.cluster is not None else None
    line = orjson.dumps(ActRecord(time.time(), instance, act, server, cli_user(), CLI).to_json()) + b"\n"
    file = AuditFile(audit.file, audit.max_bytes, audit.keep)
    try:
        file.append(line)
    except OSError as exc:
        print(f"troupe: audit: cannot write {audit.file}: {exc}", file=sys.stderr)
    finally:
        file.close()

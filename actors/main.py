"""troupe's entry point: patch first, then CLI (serve, status, check, discover), start, signals."""
from actors import dataclass_code_cache, hashing_without_openssl, loguru_without_asyncio, patching

patching.patch_all()  # before any other import: pykka's threads must be greenlets
hashing_without_openssl.install()  # before hashlib's first import
loguru_without_asyncio.install()  # before loguru's first import
dataclass_code_cache.install()  # before the first @dataclass

import argparse  # noqa: E402
import gc  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402
import gevent.event  # noqa: E402

from actors import __version__  # noqa: E402
# Only what reading the config needs (yaml, the settings model): the config's servers start next,
# before troupe loads the rest of itself (loguru included), see serve().
from actors.settings import config as config_mod  # noqa: E402

COMMANDS = ("serve", "status", "check", "discover")
TRUST_COMMANDS = ("approvals", "approve", "deny")


def _serve_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="troupe", description="troupe: one MCP endpoint for all your MCP servers.",
                                epilog="Other commands: troupe status | check CONFIG | discover | approvals | "
                                       "approve NAME | deny NAME | auth NAME | audit  (each has --help)")
    p.add_argument("--config", help="YAML config or a Claude-style mcpServers JSON file (default: embedded)")
    p.add_argument("--transport", choices=config_mod.SERVE_TRANSPORTS, help="serve over stdio or http")
    p.add_argument("--mode", choices=config_mod.MODES, help="meta: meta-tools only; flat: every tool")
    p.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="HTTP port (0 = any free port)")
    p.add_argument("--profile", help="serve in this profile (profiles: in the config): the stdio client's view, "
                                     "and that of HTTP clients not named in serve.clients")
    p.add_argument("--redis", help="join a cluster of troupe instances sharing this Redis (redis://HOST:PORT/DB)")
    p.add_argument("--log-level", help="DEBUG, INFO, WARNING, ERROR (default: WARNING over stdio, INFO over HTTP "
                                       "or with --log-json)")
    p.add_argument("--log-json", action="store_true", help="log JSON lines to stderr")
    p.add_argument("--discovery", action=argparse.BooleanOptionalAction, default=None,
                   help="find servers in client config files and on PATH (default: config's discovery.enabled)")
    p.add_argument("--version", action="version", version=f"troupe {__version__}")
    return p


def _log_level(args: argparse.Namespace, transport: str) -> str:
    """--log-level, else quiet over stdio: a stdio client (Claude Code, say) shows every stderr
    line its server writes as an error, so only what needs the user's eye goes there. Over HTTP,
    or as JSON lines for a log collector, troupe reports its INFO lines as before."""
    if args.log_level:
        return args.log_level
    return "INFO" if transport != "stdio" or args.log_json else "WARNING"


def serve(argv: list[str]) -> int:
    args = _serve_parser().parse_args(argv)
    try:
        config = config_mod.with_overrides(config_mod.load(args.config), transport=args.transport, mode=args.mode,
                                           host=args.host, port=args.port, redis=args.redis,
                                           profile=args.profile)
    except config_mod.ConfigError as exc:
        print("troupe: config error:\n" + "\n".join(f"  {p}" for p in exc.problems), file=sys.stderr)
        return 2
    from actors.serve.security import exposure_refusal
    refusal = exposure_refusal(config.serve)  # before anything starts: nothing to tear down
    if refusal is not None:
        print(f"troupe: {refusal}", file=sys.stderr)
        return 2
    # The config's stdio servers start now, beside the rest of troupe's own start (the imports
    # below, its logging first): supervision/early_start.py says which and why. Reading the
    # config and launching import neither loguru nor the catalogue, so the servers start ~25 ms
    # sooner than after them (one slow to boot, `npx` resolving a package, is ready that much
    # sooner; 50 fast ones end no sooner: the cores are busy with them then anyway).
    from actors.supervision import early_start
    from actors.trust import ledger
    early = early_start.start(config, ledger.path_for(config))
    try:
        from loguru import logger

        from actors import logs
        logs.setup(_log_level(args, config.serve.transport), args.log_json)
        # stdout belongs to MCP in stdio mode: a stray print from anywhere goes to stderr.
        sys.stdout = sys.stderr
        from actors.runtime import Runtime
        runtime = Runtime(config, discovery=args.discovery, early=early)
    except BaseException:  # nothing is left running: the early processes live in sessions of their own
        early.discard_rest(wait=5.0)
        raise
    stop = gevent.event.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(sig, stop.set)
    watcher = None
    if args.config:
        from actors.settings.reload import ConfigWatcher
        watcher = ConfigWatcher(runtime, args.config).start()
    # SIGHUP's default would kill us: reload the file, or say there is none.
    gevent.signal_handler(signal.SIGHUP, watcher.reload if watcher else
                          lambda: logger.warning("SIGHUP: no --config file to reload"))
    runtime.start()
    if config.serve.transport == "stdio":
        from actors.serve import stdio
        worker = gevent.spawn(stdio.serve, runtime)
    else:
        from actors.serve import http
        worker = gevent.spawn(http.serve, runtime, stop)
    worker.link(lambda _: stop.set())
    logger.info("troupe {} serving over {} in {} mode ({} servers configured)", __version__,
                config.serve.transport, config.serve.mode, len(config.servers))
    # What is alive now (modules, config, the actors) lives as long as the process: kept out of
    # the cycle collector's way, so a full collection walks only what came since. Walking all of
    # it took 120-180 ms on a loaded 2-core machine, with every client's call waiting (DESIGN.md:
    # no more than ~50 ms on the hub). Objects frozen are still freed when their count drops.
    gc.freeze()
    gevent.spawn(dataclass_code_cache.settle)  # after the first answers: a fresh table costs a write
    try:
        stop.wait()
    finally:
        logger.info("shutting down")
        if watcher is not None:
            watcher.stop()
        worker.kill(block=True, timeout=1.0)
        runtime.stop()
    if worker.exception is not None and not isinstance(worker.exception, gevent.GreenletExit):
        logger.error("serving failed: {}", worker.exception)
        return 1
    return 0


def cli(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in COMMANDS else "serve"
    if argv and argv[0] in COMMANDS:
        argv = argv[1:]
    if argv and argv[0] == "auth":  # an upstream's OAuth sign-in link, from a running troupe
        from actors.auth import cli as auth_cli
        return auth_cli.run(argv[1:])
    if argv and argv[0] == "audit":  # the audit trail the config names (actors/ops)
        from actors.ops import cli as audit_cli
        return audit_cli.run(argv[1:])
    if argv and argv[0] in TRUST_COMMANDS:
        from actors import logs
        from actors.trust import cli as trust_cli
        logs.setup("WARNING", False)
        return trust_cli.run(argv[0], argv[1:])
    if command == "serve":
        return serve(argv)
    from actors import commands
    return commands.run(command, argv)


def main() -> None:
    sys.exit(cli())


if __name__ == "__main__":
    main()

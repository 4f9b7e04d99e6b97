"""``python -m kontrakt.registry.server [--host H] [--port P] [--storage FILE] [--auth-file F]``."""

from __future__ import annotations

import argparse
import logging
import os
import ssl
import sys

from kontrakt.registry.server import RegistryServer
from kontrakt.registry.server._auth import ROLES, Authenticator, Role


def _principal(spec: str, parser: argparse.ArgumentParser) -> tuple[str, Role]:
    """``NAME=ROLE`` → (NAME, ROLE); the secret itself comes from the environment."""
    name, sep, role = spec.rpartition("=")
    if not sep or not name or role not in ROLES:
        parser.error(f"expected NAME=ROLE with ROLE one of {', '.join(ROLES)}, got {spec!r}")
    return name, role


def main(argv: list[str] | None = None) -> int:
    """Run the embedded registry until interrupted.

    Args:
        argv: command-line arguments (defaults to ``sys.argv[1:]``).

    Returns:
        The process exit status.
    """
    parser = argparse.ArgumentParser(prog="python -m kontrakt.registry.server",
                                     description="Confluent-compatible Schema Registry")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind")
    parser.add_argument("--port", type=int, default=8081, help="TCP port (0: any free port)")
    parser.add_argument("--storage", default=None,
                        help="journal file holding the state (survives restarts)")
    parser.add_argument("--no-fsync", action="store_true",
                        help="do not wait for each write to reach the disk before answering "
                        "(faster on slow disks; a power loss may lose acknowledged writes)")
    parser.add_argument("--auth-file", default=None,
                        help='JSON file {"users": {NAME: {"password": P, "role": R}}, '
                        '"tokens": {TOKEN: R}} with R read-only or read-write; requests '
                        "then need HTTP basic or bearer credentials")
    parser.add_argument("--user", action="append", default=[], metavar="NAME=ROLE",
                        help="a basic-auth user whose password is in the environment "
                        "variable KONTRAKT_REGISTRY_PASSWORD_<NAME> (kept off the command "
                        "line, which other local users can read); repeatable")
    parser.add_argument("--token-env", action="append", default=[], metavar="VAR=ROLE",
                        help="a bearer token taken from environment variable VAR; repeatable")
    parser.add_argument("--tls-cert", default=None, metavar="PEM",
                        help="serve HTTPS with this certificate chain")
    parser.add_argument("--tls-key", default=None, metavar="PEM",
                        help="private key of --tls-cert (default: inside it)")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in 0..65535, got {args.port}")
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    auth = None
    users: dict[str, tuple[str, Role]] = {}
    tokens: dict[str, Role] = {}
    if args.auth_file:
        try:
            base = Authenticator.from_file(args.auth_file)
        except (OSError, ValueError) as exc:
            parser.error(f"--auth-file: {exc}")
        users.update(base.users)
        tokens.update(base.tokens)
    for spec in args.user:
        name, role = _principal(spec, parser)
        password = os.environ.get(f"KONTRAKT_REGISTRY_PASSWORD_{name}")
        if not password:
            parser.error(f"--user {name}: set KONTRAKT_REGISTRY_PASSWORD_{name}")
        users[name] = (password, role)
    for spec in args.token_env:
        var, role = _principal(spec, parser)
        token = os.environ.get(var)
        if not token:
            parser.error(f"--token-env {var}: the variable is not set")
        tokens[token] = role
    if users or tokens:
        auth = Authenticator(users, tokens)
    tls = None
    if args.tls_key and not args.tls_cert:
        parser.error("--tls-key needs --tls-cert")
    if args.tls_cert:
        try:
            tls = RegistryServer.tls_context(args.tls_cert, args.tls_key)
        except (OSError, ssl.SSLError) as exc:
            parser.error(f"--tls-cert/--tls-key: {exc}")
    server = RegistryServer(args.host, args.port, storage=args.storage,
                            fsync=not args.no_fsync, verbose=args.verbose, auth=auth,
                            ssl_context=tls)
    server.bind()
    print(f"kontrakt registry listening on {server.url}"
          + (" (authentication required)" if auth else ""), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m kontrakt.registry.server [--host H] [--port P] [--storage FILE]``."""

from __future__ import annotations

import argparse
import sys

from kontrakt.registry.server import RegistryServer


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
                        help="JSON file holding the state (survives restarts)")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in 0..65535, got {args.port}")
    server = RegistryServer(args.host, args.port, storage=args.storage, verbose=args.verbose)
    server.bind()
    print(f"kontrakt registry listening on {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

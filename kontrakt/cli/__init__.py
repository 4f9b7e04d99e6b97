"""The ``kontrakt`` command: a development stack, kcat-style produce and consume, topic, group
and cluster administration, and schema contracts.

    kontrakt dev                                   # broker + registry on 127.0.0.1
    kontrakt produce orders < lines.txt            # one record per line
    kontrakt consume orders -o beginning -e -f '%k %s\\n'
    kontrakt topics create orders -p 6
    kontrakt groups describe billing               # lag per partition
    kontrakt cluster quorum --replication          # the KRaft metadata quorum
    kontrakt configs describe topic orders --all   # every config, defaults too
    kontrakt transactions find-hanging --broker 1  # then: transactions abort ...
    kontrakt schemas check schemas/ --git main

``--bootstrap`` and ``--registry`` also come from ``KONTRAKT_BOOTSTRAP`` and
``KONTRAKT_REGISTRY``; any client option from ``-X key=value`` or ``--config FILE``.
``kontrakt COMMAND --help`` shows each command's options and defaults.

Exit codes: 0 success; 1 a check failed (an incompatible schema, fewer records than
``--count``); 2 usage or input errors; 3 the broker or registry unreachable or failing;
130 interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from kontrakt import __version__
from kontrakt.cli._admin import groups, topics
from kontrakt.cli._cluster_cmds import cluster
from kontrakt.cli._common import EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, CliError
from kontrakt.cli._config_cmds import configs
from kontrakt.cli._dev import dev
from kontrakt.cli._io import consume, produce
from kontrakt.cli._schema_cmds import schemas
from kontrakt.cli._txn_cmds import transactions

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="kontrakt")
def cli() -> None:
    """Kontrakt: typed, schema-contracted Kafka from the command line."""


for command in (dev, produce, consume, topics, groups, cluster, transactions, configs,
                schemas):
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``kontrakt`` command.

    Args:
        argv: arguments without the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit code (also what the console script exits with); see the module docs.
    """
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="kontrakt",
                 standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except CliError as exc:
        exc.show()
        return exc.exit_code
    except click.ClickException as exc:
        # click's own (a file that cannot be opened, a bad parameter) are input errors.
        exc.show()
        return EXIT_INPUT if exc.exit_code == 1 else int(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("kontrakt: interrupted", err=True)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        click.echo("kontrakt: interrupted", err=True)
        return EXIT_INTERRUPTED
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_INPUT)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

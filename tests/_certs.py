"""Test certificates made with the openssl command: a CA and a server certificate for
127.0.0.1 signed by it, for the TLS tests of the clients and of the in-process cluster."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def openssl(*args: str, cwd: Path) -> None:
    """Run ``openssl args`` in ``cwd``; fails the test on an error."""
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca_and_server(d: Path) -> Path:
    """Write ``ca.pem`` / ``ca.key`` and ``server.pem`` / ``server.key`` (CN and IP SAN
    127.0.0.1, valid two days) into ``d``; skips the test without the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=kontrakt test CA", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=127.0.0.1", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf",
            cwd=d)
    return d

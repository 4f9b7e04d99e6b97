"""A real MIT Kerberos KDC (Debian's ``krb5-kdc``) for the GSSAPI tests, on 127.0.0.1.

The realm lives in a temporary directory: its database is made with ``kdb5_util``, its
principals and keytabs with ``kadmin.local``, and ``krb5kdc`` serves it on a free port (TCP
only, so that no datagram leaves loopback unanswered). ``KRB5_CONFIG`` must name
:attr:`Kdc.krb5_conf` in every process that asks it for tickets (the test sets it).

:func:`kdc_missing` says why a KDC cannot be had here (tests skip with that reason).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from kontrakt.testing import free_port

REALM = "KONTRAKT.TEST"
_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local")
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SBIN))


def kdc_missing() -> str | None:
    """Why no KDC can be started here, or None."""
    missing = [t for t in _TOOLS if _tool(t) is None]
    if missing:
        return (f"no MIT Kerberos KDC here ({', '.join(missing)} not found): install "
                "Debian's krb5-kdc and krb5-admin-server (scripts/test.sh does, as root)")
    try:
        import gssapi  # noqa: F401
    except ImportError:
        return ("the gssapi package is not installed (pip install 'kontrakt[gssapi]'; it "
                "builds against libkrb5-dev)")
    return None


class Kdc:
    """A KDC for :data:`REALM` serving from ``directory``; stop it with :meth:`close`.

    Attributes:
        krb5_conf: the client configuration naming this KDC (for ``KRB5_CONFIG``).
    """

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.krb5_conf = directory / "krb5.conf"
        self._kdc_conf = directory / "kdc.conf"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._env = {**os.environ, "KRB5_CONFIG": str(self.krb5_conf),
                     "KRB5_KDC_PROFILE": str(self._kdc_conf)}
        for attempt in range(5):
            self.port = free_port("127.0.0.1")
            self._write_configs()
            if attempt == 0:
                self._run("kdb5_util", "create", "-s", "-r", REALM, "-P",
                          "kdc-master-" + os.urandom(6).hex())
            if self._start():
                return
        raise RuntimeError(f"krb5kdc did not start; see {directory / 'kdc.log'}")

    def _write_configs(self) -> None:
        d = self.dir
        self.krb5_conf.write_text(f"""\
[libdefaults]
    default_realm = {REALM}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    default_ccache_name = MEMORY:kontrakt-tests
[realms]
    {REALM} = {{
        kdc = 127.0.0.1:{self.port}
    }}
""")
        self._kdc_conf.write_text(f"""\
[kdcdefaults]
    kdc_listen = 127.0.0.1:{self.port}
    kdc_tcp_listen = 127.0.0.1:{self.port}
[realms]
    {REALM} = {{
        database_name = {d / 'principal'}
        key_stash_file = {d / 'stash'}
        acl_file = {d / 'kadm5.acl'}
        kdc_listen = 127.0.0.1:{self.port}
        kdc_tcp_listen = 127.0.0.1:{self.port}
    }}
[logging]
    kdc = FILE:{d / 'kdc.log'}
""")

    def _run(self, tool: str, *args: str) -> str:
        exe = _tool(tool)
        assert exe is not None, tool
        done = subprocess.run([exe, *args], env=self._env, capture_output=True, timeout=60,
                              check=False)
        if done.returncode:
            raise RuntimeError(f"{tool} {' '.join(args)} failed: {done.stderr.decode()}")
        return done.stdout.decode()

    def _start(self) -> bool:
        exe = _tool("krb5kdc")
        assert exe is not None
        self._proc = subprocess.Popen([exe, "-n", "-r", REALM], env=self._env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False  # e.g. the port was taken meanwhile
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                time.sleep(0.05)
        self.close()
        return False

    def add_principal(self, name: str) -> str:
        """Create ``name`` with a random key; returns ``name@REALM``."""
        self._run("kadmin.local", "-r", REALM, "-q", f"addprinc -randkey {name}")
        return f"{name}@{REALM}"

    def keytab(self, name: str, path: Path) -> Path:
        """Export ``name``'s key to ``path``. Each export makes a new key (and version)."""
        self._run("kadmin.local", "-r", REALM, "-q", f"ktadd -k {path} {name}")
        return path

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)

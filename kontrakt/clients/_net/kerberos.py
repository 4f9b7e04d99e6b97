"""SASL/GSSAPI (Kerberos V5) on the ``gssapi`` binding (the ``kontrakt[gssapi]`` extra).

Kafka carries the GSS-API tokens as they are: SaslHandshake names ``GSSAPI``, then each
SaslAuthenticate request carries the client's next token and each response the broker's.
After the security context is set up, RFC 4752 section 3.1 adds one more round: the broker
sends a wrapped 4-byte message (the security layers it offers and its largest buffer), the
client answers with a wrapped 4-byte message choosing "no security layer" (Kafka protects
the connection with TLS, not with GSS-API wrapping), and the broker's answer ends the login.

The exchange is sans-I/O in :class:`GssapiClient`; :class:`GssapiAuthenticator` drives it,
running the GSS-API calls (which may ask the KDC for tickets, a blocking network call) in a
worker thread so that the event loop never waits on the KDC.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kontrakt.clients._net.security import SaslAuthenticationError, _authenticate, _handshake
from kontrakt.errors import ConfigError

if TYPE_CHECKING:
    from kontrakt.clients._net.connection import BrokerConnection

__all__ = ["GssapiAuthenticator", "GssapiClient", "build_gssapi"]

#: RFC 4752: bit 0 of the first byte of the security-layer message means "no security layer"
_NO_SECURITY_LAYER = 1


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError as exc:
        raise ConfigError(
            "sasl.mechanism=GSSAPI needs the gssapi package (pip install 'kontrakt[gssapi]'; "
            f"it builds against the system's Kerberos, e.g. Debian's libkrb5-dev): {exc}"
        ) from None
    return gssapi


def build_gssapi(cfg: Mapping[str, Any]) -> GssapiAuthenticator:
    """The GSSAPI authenticator for ``sasl.kerberos.*``.

    Raises:
        ConfigError: the ``gssapi`` package is not installed.
    """
    _gssapi()
    return GssapiAuthenticator(cfg["sasl.kerberos.service.name"],
                               cfg.get("sasl.kerberos.principal"),
                               cfg.get("sasl.kerberos.keytab"))


class GssapiClient:
    """The client side of a Kafka SASL/GSSAPI login, without I/O (but with the GSS-API
    library's own calls to the KDC, made when the credentials are acquired and on the first
    :meth:`respond`).

    Args:
        service: the brokers' Kerberos service name (``sasl.kerberos.service.name``).
        host: the broker's host name, as in ``bootstrap.servers`` or its advertised listener.
        principal: the client's principal; None: the credentials' default.
        keytab: a keytab to obtain the client's tickets from; None: the ticket cache (or
            the keytab ``KRB5_CLIENT_KTNAME`` names).

    Raises:
        SaslAuthenticationError: no credentials for ``principal`` (not in the keytab, no
            ticket, a keytab the KDC refuses).
    """

    def __init__(self, service: str, host: str, principal: str | None = None,
                 keytab: str | None = None) -> None:
        gssapi = _gssapi()
        self._gss = gssapi
        name = (gssapi.Name(principal, gssapi.NameType.kerberos_principal)
                if principal else None)
        store = None
        if keytab:
            # Tickets obtained from the keytab go to a private in-memory cache, not to the
            # user's default ticket cache.
            store = {"client_keytab": keytab,
                     "ccache": f"MEMORY:kontrakt-{secrets.token_hex(8)}"}
        try:
            creds = gssapi.Credentials(name=name, usage="initiate", store=store)
        except gssapi.exceptions.GSSError as exc:
            raise SaslAuthenticationError(
                f"no Kerberos credentials for {principal or 'the default principal'}"
                f"{f' in keytab {keytab}' if keytab else ''}: {_describe(exc)}",
                mechanism="GSSAPI") from None
        target = gssapi.Name(f"{service}@{host}", gssapi.NameType.hostbased_service)
        flags = [gssapi.RequirementFlag.mutual_authentication,
                 gssapi.RequirementFlag.out_of_sequence_detection]
        self._ctx = gssapi.SecurityContext(name=target, creds=creds, flags=flags,
                                           usage="initiate")
        self.target = f"{service}/{host}"
        self._negotiating = False
        self.done = False

    def respond(self, challenge: bytes | None) -> bytes:
        """The client's next message, given the broker's last one (None at the start).

        Raises:
            SaslAuthenticationError: the KDC or the broker's token refused the login, or the
                broker insists on a security layer.
        """
        gss = self._gss
        try:
            if not self._negotiating:
                token = self._ctx.step(challenge or None)
                if self._ctx.complete:
                    self._negotiating = True
                # RFC 4752: with the context complete and no token to send, an empty one.
                return bytes(token or b"")
            offer = self._ctx.unwrap(challenge or b"").message
        except gss.exceptions.GSSError as exc:
            raise SaslAuthenticationError(
                f"Kerberos login to {self.target} failed: {_describe(exc)}",
                mechanism="GSSAPI") from None
        if len(offer) != 4 or not offer[0] & _NO_SECURITY_LAYER:
            raise SaslAuthenticationError(
                f"broker {self.target} offers no 'no security layer' option "
                f"(offer {offer.hex()}); Kafka clients use TLS instead of GSS-API wrapping",
                mechanism="GSSAPI")
        self.done = True
        # The layer chosen, then a largest buffer of 0 (no layer); no authorization id.
        reply = bytes([_NO_SECURITY_LAYER, 0, 0, 0])
        return bytes(self._ctx.wrap(reply, False).message)


def _describe(exc: Any) -> str:
    try:
        return str(exc.gen_message()).replace("\n", "; ")
    except Exception:  # the message is only for the error text
        return str(exc) or type(exc).__name__


class GssapiAuthenticator:
    """SASL/GSSAPI (Kerberos). See :mod:`kontrakt.clients._net.kerberos`."""

    mechanism = "GSSAPI"

    def __init__(self, service: str, principal: str | None, keytab: str | None) -> None:
        self.service = service
        self.principal = principal
        self.keytab = keytab

    def __repr__(self) -> str:
        return (f"GssapiAuthenticator(service={self.service!r}, "
                f"principal={self.principal!r}, keytab={self.keytab!r})")

    async def authenticate(self, conn: BrokerConnection) -> int:
        """Log in on ``conn`` with a ticket for ``<service>/<conn.host>``; returns the
        session lifetime in ms the broker set (0: none).

        Raises:
            SaslAuthenticationError: no credentials, the KDC refused (unknown principal or
                service, wrong key), the broker refused the ticket, or the broker does not
                enable GSSAPI. Not retried: the message names the principal, the service
                principal and the broker.
        """
        mech, who = self.mechanism, self.principal
        await _handshake(conn, mech, who)
        try:
            client = await asyncio.to_thread(GssapiClient, self.service, conn.host,
                                             self.principal, self.keytab)
            token = await asyncio.to_thread(client.respond, None)
            while True:
                answer, lifetime = await _authenticate(conn, mech, who, token)
                if client.done:
                    return lifetime
                token = await asyncio.to_thread(client.respond, answer)
        except SaslAuthenticationError as exc:
            if exc.broker is not None:
                raise
            raise SaslAuthenticationError(
                f"SASL GSSAPI login{f' as {who!r}' if who else ''} failed: {exc}",
                broker=conn.address, mechanism=mech) from None

"""TLS contexts and SASL authentication (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).

The SCRAM exchange (RFC 5802 / RFC 7677) is sans-I/O in :class:`ScramClient`; the
authenticators drive it over a connection with SaslHandshake + SaslAuthenticate.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kontrakt.errors import AuthenticationError, ConfigError, KafkaConnectionError

if TYPE_CHECKING:
    from kontrakt.clients._net.connection import BrokerConnection

__all__ = [
    "PlainAuthenticator",
    "SaslAuthenticationError",
    "SaslAuthenticator",
    "ScramAuthenticator",
    "ScramClient",
    "TlsCertificateError",
    "TlsHandshakeError",
    "TlsPlaintextListenerError",
    "build_sasl",
    "build_ssl_context",
    "load_client_certificate",
    "tls_context",
    "tls_error",
    "tls_failure",
    "tls_handshake_failed",
]


class SaslAuthenticationError(AuthenticationError):
    """SASL authentication with a broker failed (bad credentials, mechanism not enabled,
    or a server signature that does not verify). Fatal: raised by the first call that
    needs a connection, without retries. The message names the mechanism, the user and
    the broker, never the secret.

    Attributes:
        mechanism: the SASL mechanism, e.g. ``SCRAM-SHA-512`` (None when not known).
    """

    def __init__(self, message: str, *, broker: str | None = None,
                 mechanism: str | None = None) -> None:
        super().__init__(message, broker=broker)
        self.mechanism = mechanism


class TlsHandshakeError(KafkaConnectionError):
    """No TLS session could be set up with a broker: the certificate was refused, or the
    broker closed the connection or stayed silent during the handshake (as a plaintext
    listener does). The message says which, and what to check."""

    def __init__(self, message: str, *, broker: str | None = None) -> None:
        super().__init__(message, broker=broker)


class TlsCertificateError(TlsHandshakeError, AuthenticationError):
    """The broker's TLS certificate was refused (unknown CA, expired, host-name mismatch).
    Fatal like a refused password: raised by the first call that needs a connection,
    without retries."""

    def __init__(self, message: str, *, broker: str | None = None) -> None:
        super().__init__(message, broker=broker)


class TlsPlaintextListenerError(TlsHandshakeError, AuthenticationError):
    """``security.protocol`` asks for TLS but the broker's port is a plaintext Kafka
    listener (it answered a plaintext request). Fatal: retrying cannot change it, so the
    first call that needs a connection raises it after about a second."""

    def __init__(self, message: str, *, broker: str | None = None) -> None:
        super().__init__(message, broker=broker)


def tls_error(address: str, exc: BaseException | None,
              waited: float | None = None) -> TlsHandshakeError:
    """The typed error for a failed TLS handshake with ``address`` (see :func:`tls_failure`):
    :class:`TlsCertificateError` when the certificate was refused."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return TlsCertificateError(tls_failure(address, exc, waited))
    return TlsHandshakeError(tls_failure(address, exc, waited))


_PLAINTEXT_HINT = ("; if it is a plaintext listener, set security.protocol to PLAINTEXT "
                   "(or SASL_PLAINTEXT)")


def tls_handshake_failed(exc: BaseException) -> bool:
    """Whether ``exc``, raised while opening a TLS connection, comes from the handshake
    (not from resolving the name or from a refused TCP connect)."""
    return isinstance(exc, (ssl.SSLError, ConnectionResetError, ConnectionAbortedError,
                            EOFError)) or (isinstance(exc, OSError) and exc.errno is None)


def tls_failure(address: str, exc: BaseException | None, waited: float | None = None) -> str:
    """Why a TLS connection to ``address`` failed, for a :class:`TlsHandshakeError`.

    Args:
        exc: what the handshake raised, or None when it timed out after ``waited`` seconds.
    """
    if exc is None:
        return (f"no TLS session with {address} within {waited}s "
                "(socket.connection.setup.timeout.ms: TCP connect plus TLS handshake); a "
                f"plaintext listener never answers a TLS handshake{_PLAINTEXT_HINT}")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"TLS handshake with {address} failed: the broker's certificate was refused: "
                f"{exc.verify_message or exc.reason or exc} (check ssl.ca.location and, for a "
                "host-name mismatch, the address in bootstrap.servers)")
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, ssl.SSLError) and not isinstance(exc, ssl.SSLEOFError) \
            and exc.reason != "WRONG_VERSION_NUMBER":
        return f"TLS handshake with {address} failed: {detail}"
    # A plaintext Kafka listener reads the ClientHello as an oversized request and closes.
    return (f"TLS handshake with {address} failed: the broker closed the connection "
            f"({detail}){_PLAINTEXT_HINT}")


def build_ssl_context(cfg: Mapping[str, Any]) -> ssl.SSLContext | None:
    """An SSL context from ``security.protocol`` and the ``ssl.*`` options, or None.

    Raises:
        ConfigError: a certificate or key file cannot be loaded.
    """
    if cfg["security.protocol"] not in ("SSL", "SASL_SSL"):
        return None
    ready = cfg.get("ssl.context")
    if ready is not None:
        if not isinstance(ready, ssl.SSLContext):
            raise ConfigError("ssl.context must be an ssl.SSLContext", option="ssl.context")
        return ready
    return tls_context(ca=cfg.get("ssl.ca.location"),
                       cert=cfg.get("ssl.certificate.location") or None,
                       key=cfg.get("ssl.key.location"), password=cfg.get("ssl.key.password"),
                       check_hostname=cfg.get("ssl.endpoint.identification.algorithm") != "none")


def tls_context(*, ca: str | None = None, cert: str | None = None, key: str | None = None,
                password: str | None = None, check_hostname: bool = True) -> ssl.SSLContext:
    """The TLS client context of every Kontrakt connection: Kafka brokers and the Schema
    Registry both build theirs here, from the same ``ssl.*`` option names.

    Args:
        ca: ``ssl.ca.location``: the CA bundle (PEM) to verify the server with; None or
            empty: the system's trust store.
        cert: ``ssl.certificate.location``: the client certificate (PEM), for mutual TLS.
        key: ``ssl.key.location``: its private key (PEM; None: in the certificate's file).
        password: ``ssl.key.password``: the key's password.
        check_hostname: check the server's host name against its certificate.

    Raises:
        ConfigError: the CA bundle, certificate or key cannot be loaded (see
            :func:`load_client_certificate`); the message never shows the password.
    """
    try:
        ctx = ssl.create_default_context(cafile=ca or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS CA bundle ssl.ca.location={ca!r}: "
                          f"{exc.strerror or exc}", option="ssl.ca.location") from exc
    if cert:
        load_client_certificate(ctx, cert, key, password)
    if not check_hostname:
        ctx.check_hostname = False
    return ctx


def load_client_certificate(ctx: ssl.SSLContext, cert: str, key: str | None,
                             password: str | None) -> None:
    """``ctx.load_cert_chain(cert, key, password)`` with errors that say which file and
    what is wrong (shared by the Kafka and Schema Registry clients).

    Raises:
        ConfigError: a file cannot be read, is not PEM, the key is encrypted and no
            password (or a wrong one) was given, or the key does not match the certificate.
            The password never appears in the message.

    The key's password goes through a callback, which tells whether the key was encrypted
    at all; without one, OpenSSL would prompt for a password on the terminal.
    """
    where = f"ssl.key.location={key!r}" if key else f"ssl.certificate.location={cert!r}"
    asked = False

    def give_password() -> str:
        nonlocal asked
        asked = True
        if password is None:
            raise ConfigError(f"the private key in {where} is encrypted: set ssl.key.password")
        return password

    try:
        ctx.load_cert_chain(cert, key, password=give_password)
    except OSError as exc:
        if not isinstance(exc, ssl.SSLError):
            raise ConfigError(f"cannot read the client certificate or key "
                              f"(ssl.certificate.location={cert!r}, ssl.key.location={key!r}): "
                              f"{exc.strerror or exc}") from exc
        if asked and password is not None and exc.reason in ("PEM_LIB", "BAD_DECRYPT", None):
            raise ConfigError(f"ssl.key.password does not decrypt the private key in {where} "
                              "(wrong password?)") from None
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise ConfigError(f"the private key in {where} does not belong to the certificate "
                              f"in ssl.certificate.location={cert!r}") from None
        raise ConfigError(f"cannot load the client certificate ssl.certificate.location="
                          f"{cert!r} with its key ({where}): {exc.reason or exc}; both must "
                          "be PEM files") from None


def build_sasl(cfg: Mapping[str, Any]) -> SaslAuthenticator | None:
    """The SASL authenticator configured by ``sasl.*`` (and ``oauth_cb``), or None without
    SASL.

    Raises:
        ConfigError: SASL is on but its options are missing or contradict each other
            (PLAIN/SCRAM need ``sasl.username`` and ``sasl.password``; OAUTHBEARER a token
            source: see :func:`kontrakt.clients._net.oauth.build_oauthbearer`), or GSSAPI
            without the ``gssapi`` package.
    """
    if cfg["security.protocol"] not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return None
    mech = cfg["sasl.mechanism"]
    if mech == "OAUTHBEARER":
        from kontrakt.clients._net.oauth import build_oauthbearer

        return build_oauthbearer(cfg)
    if mech == "GSSAPI":
        from kontrakt.clients._net.kerberos import build_gssapi

        return build_gssapi(cfg)
    user, password = cfg.get("sasl.username"), cfg.get("sasl.password")
    if user is None or password is None:
        raise ConfigError("sasl.username and sasl.password are required for SASL")
    if mech == "PLAIN":
        return PlainAuthenticator(user, password)
    return ScramAuthenticator(mech, user, password,
                              token_auth=bool(cfg.get("sasl.scram.tokenauth")))


class SaslAuthenticator(Protocol):
    """A SASL mechanism's client side, driven over a connection's SaslHandshake and
    SaslAuthenticate requests."""

    mechanism: str

    async def authenticate(self, conn: BrokerConnection) -> int:
        """Log in on ``conn``; return the session lifetime in ms the broker set (0: none).

        Raises:
            SaslAuthenticationError: the broker (or the token source) refused.
        """


class ScramClient:
    """The client side of a SCRAM exchange, without I/O.

    Args:
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        nonce: the client nonce (random by default; fixed only in tests).
        extensions: SCRAM extensions Kafka reads from the client-first message, e.g.
            ``{"tokenauth": "true"}`` for a delegation-token login.
    """

    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: str | None = None, extensions: Mapping[str, str] | None = None
                 ) -> None:
        if mechanism == "SCRAM-SHA-256":
            self._hash = hashlib.sha256
        elif mechanism == "SCRAM-SHA-512":
            self._hash = hashlib.sha512
        else:
            raise ConfigError(f"unknown SCRAM mechanism {mechanism!r}")
        self._name = "sha256" if mechanism.endswith("256") else "sha512"
        self.username = username.replace("=", "=3D").replace(",", "=2C")
        self.password = password
        self.nonce = nonce or secrets.token_urlsafe(18)
        # Kafka appends its extensions to client-first-message-bare (they are then part of
        # the AuthMessage both sides sign).
        ext = "".join(f",{k}={v}" for k, v in (extensions or {}).items())
        self._client_first_bare = f"n={self.username},r={self.nonce}{ext}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        """client-first-message (no channel binding)."""
        return ("n,," + self._client_first_bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        """client-final-message with the proof, from the server-first-message.

        Raises:
            SaslAuthenticationError: the server's message is malformed or its nonce does not
                extend ours.
        """
        text = server_first.decode()
        parts = dict(p.split("=", 1) for p in text.split(",") if "=" in p)
        try:
            nonce, salt, iterations = parts["r"], base64.b64decode(parts["s"]), int(parts["i"])
        except (KeyError, ValueError) as exc:
            raise SaslAuthenticationError(f"malformed SCRAM server-first message: {text!r}") \
                from exc
        if not nonce.startswith(self.nonce):
            raise SaslAuthenticationError("SCRAM server nonce does not extend the client nonce")
        salted = hashlib.pbkdf2_hmac(self._name, self.password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self._hash).digest()
        stored_key = self._hash(client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_sig = hmac.new(stored_key, auth_message, self._hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, client_sig, strict=False))
        server_key = hmac.new(salted, b"Server Key", self._hash).digest()
        self._server_signature = hmac.new(server_key, auth_message, self._hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """Check the server's signature.

        Raises:
            SaslAuthenticationError: the server reported an error or its signature is wrong.
        """
        text = server_final.decode()
        if text.startswith("e="):
            raise SaslAuthenticationError(f"SCRAM authentication failed: {text[2:]}")
        if not text.startswith("v=") or not hmac.compare_digest(
            base64.b64decode(text[2:]), self._server_signature
        ):
            raise SaslAuthenticationError("SCRAM server signature does not verify")


async def _handshake(conn: BrokerConnection, mechanism: str, user: str | None) -> None:
    from kontrakt.protocol.messages import SaslHandshakeRequest

    resp = await conn.send(SaslHandshakeRequest(mechanism=mechanism))
    if resp.error_code:
        raise SaslAuthenticationError(
            f"broker does not enable SASL mechanism {mechanism} "
            f"(enabled: {', '.join(resp.mechanisms) or 'none'}; error code {resp.error_code})",
            broker=conn.address, mechanism=mechanism,
        )


async def _authenticate(conn: BrokerConnection, mechanism: str, user: str | None,
                        payload: bytes) -> tuple[bytes, int]:
    """One SaslAuthenticate round trip: the server's bytes and the session lifetime (ms,
    0 when the broker sets none or speaks SaslAuthenticate v0)."""
    from kontrakt.protocol.messages import SaslAuthenticateRequest

    resp = await conn.send(SaslAuthenticateRequest(auth_bytes=payload))
    if resp.error_code:
        who = f" as {user!r}" if user else ""
        raise SaslAuthenticationError(
            f"SASL {mechanism} authentication{who} failed: "
            f"{resp.error_message or 'no reason given'} (error code {resp.error_code})",
            broker=conn.address, mechanism=mechanism,
        )
    return bytes(resp.auth_bytes), int(resp.session_lifetime_ms or 0)


class PlainAuthenticator:
    """SASL/PLAIN. Send it only over TLS: the password crosses the wire in clear."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        # One tuple, replaced whole by set_credentials (possibly from another thread): a
        # login reads it once, so it never pairs one user with another's password.
        self._credentials = (username, password)

    @property
    def username(self) -> str:
        """The user logins are made as."""
        return self._credentials[0]

    def set_credentials(self, username: str, password: str) -> None:
        """Log in as ``username`` with ``password`` from the next login on."""
        self._credentials = (username, password)

    def __repr__(self) -> str:
        return f"PlainAuthenticator(username={self.username!r})"

    async def authenticate(self, conn: BrokerConnection) -> int:
        """Log in on ``conn``; returns the session lifetime in ms (0: none).

        Raises:
            SaslAuthenticationError: the broker refused the mechanism or the credentials.
        """
        user, password = self._credentials
        await _handshake(conn, self.mechanism, user)
        _, lifetime = await _authenticate(conn, self.mechanism, user,
                                          f"\0{user}\0{password}".encode())
        return lifetime


class ScramAuthenticator:
    """SASL/SCRAM-SHA-256 or SCRAM-SHA-512.

    Args:
        token_auth: log in with a delegation token (``sasl.scram.tokenauth``): the user is
            the token id, the password the base64 of its HMAC, and the SCRAM extension
            ``tokenauth=true`` tells the broker so.
    """

    def __init__(self, mechanism: str, username: str, password: str, *,
                 token_auth: bool = False) -> None:
        self.mechanism = mechanism
        # One tuple, replaced whole (see PlainAuthenticator).
        self._credentials = (username, password)
        self.token_auth = token_auth

    @property
    def username(self) -> str:
        """The user logins are made as (the token id with ``token_auth``)."""
        return self._credentials[0]

    def set_credentials(self, username: str, password: str) -> None:
        """Log in as ``username`` with ``password`` from the next login on."""
        self._credentials = (username, password)

    def __repr__(self) -> str:
        return f"ScramAuthenticator({self.mechanism}, username={self.username!r})"

    async def authenticate(self, conn: BrokerConnection) -> int:
        """Log in on ``conn``; returns the session lifetime in ms (0: none).

        Raises:
            SaslAuthenticationError: the broker refused the mechanism or the credentials,
                or its signature does not verify (it does not know the password).
        """
        mech = self.mechanism
        user, password = self._credentials
        await _handshake(conn, mech, user)
        scram = ScramClient(mech, user, password,
                            extensions={"tokenauth": "true"} if self.token_auth else None)
        server_first, _ = await _authenticate(conn, mech, user, scram.first_message())
        try:
            final = scram.final_message(server_first)
        except SaslAuthenticationError as exc:
            raise SaslAuthenticationError(f"SASL {mech} login as {user!r}: {exc}",
                                          broker=conn.address, mechanism=mech) from None
        server_final, lifetime = await _authenticate(conn, mech, user, final)
        try:
            scram.verify(server_final)
        except SaslAuthenticationError as exc:
            raise SaslAuthenticationError(f"SASL {mech} login as {user!r}: {exc}",
                                          broker=conn.address, mechanism=mech) from None
        return lifetime

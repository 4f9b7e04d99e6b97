"""A Kafka SASL acceptor in front of Tansu, for end-to-end authentication tests.

Neither test broker speaks SASL that succeeds (TEST-BROKERS.md), so this proxy plays the
broker's authenticating half and forwards every other request to a real Tansu:

- ApiVersions is forwarded, with SaslHandshake (v0-1) and SaslAuthenticate (v0-2) added to
  the answer; SaslHandshake and SaslAuthenticate are answered here as a Kafka broker does
  (SASL_AUTHENTICATION_FAILED with a message, then the connection is closed).
- SCRAM-SHA-256/512 is verified by ``scramp`` (an independent SCRAM implementation, the one
  pg8000 uses), PLAIN against a user table, OAUTHBEARER by a validator the test passes (the
  test validates the JWT with ``joserfc``, independent of the client's code); a SCRAM login
  with Kafka's ``tokenauth=true`` extension checks a delegation token (``tokens``): the
  keys come from ``scramp``, the proof is checked here from RFC 5802 (scramp refuses
  Kafka's multi-letter extension names) and the principal is the token's owner; GSSAPI by a
  Kerberos acceptor on the ``gssapi`` binding with the service's keytab (as a Kafka broker's
  JAAS login does), ending with RFC 4752's security-layer round ("no security layer").
- A request other than ApiVersions before authentication closes the connection; so does any
  request after the session lifetime has run out without re-authentication (KIP-368), and a
  re-authentication as another principal.
- Requests are handled one at a time per connection, in order, as a broker does; each
  connection forwards to a connection of its own to Tansu (which advertises this proxy's
  port), so records really flow.

The proxy runs in threads of its own (sync and async clients alike can use it) and is
stopped by :meth:`SaslProxy.close`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import scramp

from kontrakt.protocol.headers import decode_request, decode_response, encode_response
from kontrakt.protocol.messages import (
    ApiVersionsResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33

#: (token, extensions) -> (principal, token expiry in epoch ms) or raises ValueError
OAuthValidator = Callable[[str, dict[str, str]], tuple[str, int]]

# A mechanism step: sent the client's bytes, yields the server's challenge bytes, returns
# (principal, expiry in epoch ms or None, SASL extensions) on success; raises _Refused on
# failure.
_Exchange = Generator[bytes, bytes, tuple[str, int | None, dict[str, str]]]


class _Refused(Exception):
    pass


@dataclass
class Login:
    """One successful (re-)authentication seen by the proxy."""

    mechanism: str
    principal: str
    connection: int
    reauthentication: bool
    lifetime_ms: int
    extensions: dict[str, str] = field(default_factory=dict)


class SaslProxy:
    """SASL-terminating proxy on ``port`` forwarding to the broker at ``target``.

    Args:
        scram_users / plain_users: user -> password.
        oauth: validates an OAUTHBEARER token and its extensions.
        tokens: delegation tokens for SCRAM ``tokenauth`` logins: token id -> (owner,
            password, i.e. the base64 of the token's HMAC).
        gssapi_keytab: the service keytab GSSAPI logins are accepted with (any service
            principal in it; the client's Kerberos principal becomes the login's principal).
        session_lifetime_ms: the lifetime returned by SaslAuthenticate v1+ (0: none); the
            proxy closes a connection that sends a request after it.
        fail_with: sends SASL_AUTHENTICATION_FAILED with this message to every login.

    Attributes:
        accepted: connections accepted; logins: every successful login; refusals: the
        messages of refused logins; expired: connections closed for a lapsed session.
    """

    def __init__(self, port: int, target: tuple[str, int], *,
                 scram_users: dict[str, str] | None = None,
                 plain_users: dict[str, str] | None = None,
                 oauth: OAuthValidator | None = None, session_lifetime_ms: int = 0,
                 gssapi_keytab: str | None = None,
                 tokens: dict[str, tuple[str, str]] | None = None) -> None:
        self.target = target
        self.session_lifetime_ms = session_lifetime_ms
        self.plain_users = plain_users or {}
        self.oauth = oauth
        self.gssapi_keytab = gssapi_keytab
        self.tokens = tokens if tokens is not None else {}
        self._scram: dict[str, tuple[scramp.ScramMechanism, dict[str, tuple[object, ...]]]] = {}
        for name in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            mech = scramp.ScramMechanism(name)
            self._scram[name] = (mech, {u: mech.make_auth_info(p, iteration_count=4096)
                                        for u, p in (scram_users or {}).items()})
        self.mechanisms = [*(["PLAIN"] if plain_users else []),
                           *(list(self._scram) if scram_users or tokens is not None else []),
                           *(["OAUTHBEARER"] if oauth else []),
                           *(["GSSAPI"] if gssapi_keytab else [])]
        self.accepted = 0
        self.logins: list[Login] = []
        self.refusals: list[str] = []
        self.expired = 0
        self.forwarded = 0
        self._lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", port))
        self.sock.settimeout(0.2)
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="sasl-proxy")
        self._thread.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.stopping.set()
        self.sock.close()
        with self._lock:
            for s in self._open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._thread.join(5)
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> SaslProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing -------------------------------------------------------------------

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                raw, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                number = self.accepted
            t = threading.Thread(target=self._serve, args=(raw, number), daemon=True)
            t.start()
            self._threads.append(t)

    @staticmethod
    def _read_frame(sock: socket.socket) -> bytes | None:
        head = _recv_exactly(sock, 4)
        if head is None:
            return None
        return _recv_exactly(sock, _SIZE.unpack(head)[0])

    def _serve(self, client: socket.socket, number: int) -> None:
        upstream = socket.create_connection(self.target, timeout=30)
        with self._lock:
            self._open |= {client, upstream}
        try:
            _Session(self, client, upstream, number).run()
        except OSError:
            pass
        finally:
            with self._lock:
                self._open -= {client, upstream}
            for s in (client, upstream):
                s.close()

    # --- mechanisms -----------------------------------------------------------------

    def _exchange(self, mechanism: str) -> _Exchange:
        if mechanism == "PLAIN":
            return self._plain()
        if mechanism == "OAUTHBEARER":
            return self._oauthbearer()
        if mechanism == "GSSAPI":
            return self._gssapi()
        return self._scram_exchange(mechanism)

    def _plain(self) -> _Exchange:
        first = yield b""
        _authzid, user, password = first.decode().split("\0")
        if self.plain_users.get(user) != password:
            raise _Refused("Authentication failed: Invalid username or password")
        return user, None, {}

    def _scram_exchange(self, mechanism: str) -> _Exchange:
        mech, users = self._scram[mechanism]
        server = mech.make_server(lambda user: users[user])
        first = yield b""
        if first.decode().endswith(",tokenauth=true"):
            return (yield from self._scram_token(mechanism, first.decode()))
        try:
            server.set_client_first(first.decode())
        except (KeyError, scramp.ScramException):
            raise _Refused("Authentication failed during authentication due to invalid "
                           f"credentials with SASL mechanism {mechanism}") from None
        final = yield server.get_server_first().encode()
        try:
            server.set_client_final(final.decode())
        except scramp.ScramException:
            raise _Refused("Authentication failed during authentication due to invalid "
                           f"credentials with SASL mechanism {mechanism}") from None
        yield server.get_server_final().encode()
        return server.client_first_bare.split(",")[0][2:], None, {}

    def _scram_token(self, mechanism: str, first: str) -> _Exchange:
        """A delegation-token login: SCRAM with the token id as the user name."""
        digest = hashlib.sha256 if mechanism.endswith("256") else hashlib.sha512
        refused = _Refused("Authentication failed during authentication due to invalid "
                           f"credentials with SASL mechanism {mechanism}")
        bare = first.split(",", 2)[2]
        attrs = dict(p.split("=", 1) for p in bare.split(","))
        if attrs["n"] not in self.tokens:
            raise refused
        owner, password = self.tokens[attrs["n"]]
        salt, stored_key, server_key, iterations = scramp.ScramMechanism(
            mechanism).make_auth_info(password, iteration_count=4096)
        nonce = attrs["r"] + secrets.token_urlsafe(12)
        server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        final = (yield server_first.encode()).decode()
        without_proof, _, proof = final.rpartition(",p=")
        if without_proof != f"c=biws,r={nonce}":
            raise refused
        auth_message = f"{bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, digest).digest()
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature,
                                                 strict=True))
        if digest(client_key).digest() != stored_key:
            raise refused
        server_signature = hmac.new(server_key, auth_message, digest).digest()
        yield b"v=" + base64.b64encode(server_signature)
        return owner, None, {"tokenauth": "true"}

    def _oauthbearer(self) -> _Exchange:
        # RFC 7628: gs2-header, then kvpairs separated by 0x01, ended by two 0x01.
        first = yield b""
        text = first.decode()
        if not text.startswith("n,") or not text.endswith("\x01\x01"):
            raise _Refused(f"malformed OAUTHBEARER initial response {text[:20]!r}")
        pairs = dict(p.split("=", 1) for p in text.split(",", 2)[2].strip("\x01").split("\x01"))
        auth = pairs.pop("auth", "")
        assert self.oauth is not None
        try:
            if not auth.startswith("Bearer "):
                raise ValueError("no bearer token")
            principal, expiry_ms = self.oauth(auth[len("Bearer "):], pairs)
        except ValueError as exc:
            # The server's error challenge; the client answers 0x01 and is refused.
            reply = yield b'{"status":"invalid_token"}'
            assert reply == b"\x01", reply
            raise _Refused(f"Authentication failed: {exc}") from None
        return principal, expiry_ms, pairs

    def _gssapi(self) -> _Exchange:
        import gssapi

        creds = gssapi.Credentials(usage="accept", store={"keytab": self.gssapi_keytab})
        ctx = gssapi.SecurityContext(creds=creds, usage="accept")
        token = yield b""
        try:
            out = ctx.step(token)
            while not ctx.complete:
                token = yield out or b""
                out = ctx.step(token)
            if out:
                # The last context token (mutual authentication); the client answers with
                # an empty message (RFC 4752 3.1).
                empty = yield out
                if empty:
                    raise _Refused("GSSAPI: expected an empty message after the context")
            # Offer only "no security layer" (bit 0), with a largest buffer of 0.
            reply = yield ctx.wrap(b"\x01\x00\x00\x00", False).message
            chosen = ctx.unwrap(reply).message
        except gssapi.exceptions.GSSError as exc:
            raise _Refused(f"Authentication failed: GSSAPI: {exc.gen_message()}") from None
        if len(chosen) < 4 or chosen[0] != 1:
            raise _Refused(f"GSSAPI: the client chose security layer {chosen[:1].hex()}")
        return str(ctx.initiator_name), None, {}


class _Session:
    """One client connection, served in order."""

    def __init__(self, proxy: SaslProxy, client: socket.socket, upstream: socket.socket,
                 number: int) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.number = number
        self.principal: str | None = None
        self.expires_at: float | None = None
        self.mechanism: str | None = None
        self.exchange: _Exchange | None = None

    def run(self) -> None:
        p = self.proxy
        while not p.stopping.is_set():
            frame = p._read_frame(self.client)
            if frame is None:
                return
            api_key, version, corr = _HEADER.unpack_from(frame, 0)
            if api_key == 18:
                self._api_versions(frame, version, corr)
            elif api_key == 17:
                if not self._handshake(frame, version, corr):
                    return
            elif api_key == 36:
                if not self._authenticate(frame, version, corr):
                    return
            else:
                if self.principal is None or self.exchange is not None:
                    return  # Kafka: unexpected request during the SASL exchange
                if self.expires_at is not None and time.monotonic() > self.expires_at:
                    with p._lock:
                        p.expired += 1
                    return
                self.upstream.sendall(_SIZE.pack(len(frame)) + frame)
                answer = p._read_frame(self.upstream)
                if answer is None:
                    return
                with p._lock:
                    p.forwarded += 1
                self.client.sendall(_SIZE.pack(len(answer)) + answer)

    def _api_versions(self, frame: bytes, version: int, corr: int) -> None:
        self.upstream.sendall(_SIZE.pack(len(frame)) + frame)
        answer = self.proxy._read_frame(self.upstream)
        assert answer is not None
        _, resp = decode_response(ApiVersionsResponse, version, answer)
        keys = [k for k in resp.api_keys if k.api_key not in (17, 36)]
        keys += [ApiVersionsResponse.ApiVersion(api_key=17, min_version=0, max_version=1),
                 ApiVersionsResponse.ApiVersion(api_key=36, min_version=0, max_version=2)]
        resp.api_keys = sorted(keys, key=lambda k: k.api_key)
        self.client.sendall(encode_response(resp, version, corr))

    def _handshake(self, frame: bytes, version: int, corr: int) -> bool:
        _, req = decode_request(frame)
        p = self.proxy
        if req.mechanism not in p.mechanisms:
            self.client.sendall(encode_response(SaslHandshakeResponse(
                error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=p.mechanisms), version, corr))
            return False
        self.mechanism = req.mechanism
        self.exchange = p._exchange(req.mechanism)
        next(self.exchange)
        self.client.sendall(encode_response(SaslHandshakeResponse(mechanisms=p.mechanisms),
                                            version, corr))
        return True

    def _authenticate(self, frame: bytes, version: int, corr: int) -> bool:
        _, req = decode_request(frame)
        p = self.proxy
        if self.exchange is None or self.mechanism is None:
            return False
        try:
            challenge = self.exchange.send(bytes(req.auth_bytes))
        except StopIteration as done:
            return self._logged_in(*done.value, b"", version, corr)
        except _Refused as exc:
            with p._lock:
                p.refusals.append(str(exc))
            self.client.sendall(encode_response(SaslAuthenticateResponse(
                error_code=SASL_AUTHENTICATION_FAILED, error_message=str(exc)), version, corr))
            return False
        if self.mechanism.startswith("SCRAM") and challenge.startswith(b"v="):
            # The server-final message ends a SCRAM exchange: it goes with the success.
            try:
                next(self.exchange)
            except StopIteration as done:
                return self._logged_in(*done.value, challenge, version, corr)
        self.client.sendall(encode_response(SaslAuthenticateResponse(auth_bytes=challenge),
                                            version, corr))
        return True

    def _logged_in(self, principal: str, expiry_ms: int | None, extensions: dict[str, str],
                   last: bytes, version: int, corr: int) -> bool:
        p = self.proxy
        reauth = self.principal is not None
        if reauth and principal != self.principal:
            return False  # Kafka refuses a re-authentication as someone else
        lifetime = p.session_lifetime_ms
        if expiry_ms is not None:
            left = max(0, expiry_ms - int(time.time() * 1000))
            lifetime = min(lifetime, left) if lifetime else left
        self.principal = principal
        self.exchange = None
        self.expires_at = time.monotonic() + lifetime / 1000 if lifetime else None
        with p._lock:
            p.logins.append(Login(self.mechanism or "", principal, self.number, reauth,
                                  lifetime, dict(extensions)))
        self.client.sendall(encode_response(SaslAuthenticateResponse(
            auth_bytes=last, session_lifetime_ms=lifetime if version >= 1 else 0),
            version, corr))
        return True


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)

"""SCRAM client against the published RFC test vectors.

Neither test broker offers SASL that succeeds (see TEST-BROKERS.md), so the exchange logic is
checked against RFC 7677 (SCRAM-SHA-256) and RFC 5802's message shapes.
"""

from __future__ import annotations

import pytest

from kontrakt.clients._net.security import SaslAuthenticationError, ScramClient
from kontrakt.errors import ConfigError

# RFC 7677 section 3: user "user", password "pencil".
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc7677_exchange() -> None:
    c = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)
    assert c.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert c.final_message(SERVER_FIRST) == CLIENT_FINAL
    c.verify(SERVER_FINAL)


def test_wrong_server_signature_is_rejected() -> None:
    c = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)
    c.final_message(SERVER_FIRST)
    with pytest.raises(SaslAuthenticationError, match="does not verify"):
        c.verify(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
    with pytest.raises(SaslAuthenticationError, match="invalid-proof"):
        c.verify(b"e=invalid-proof")


def test_server_nonce_must_extend_client_nonce() -> None:
    c = ScramClient("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    with pytest.raises(SaslAuthenticationError, match="nonce"):
        c.final_message(b"r=xyz,s=QUJD,i=4096")
    with pytest.raises(SaslAuthenticationError, match="malformed"):
        c.final_message(b"r=abcdef")


def test_username_is_escaped_and_mechanism_checked() -> None:
    c = ScramClient("SCRAM-SHA-512", "a=b,c", "p", nonce="n")
    assert c.first_message() == b"n,,n=a=3Db=2Cc,r=n"
    with pytest.raises(ConfigError):
        ScramClient("SCRAM-MD5", "u", "p")

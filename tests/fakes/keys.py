"""RSA key pairs for tests: a GitHub App's private key and the public key the fake verifies JWTs with."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


@dataclass(frozen=True)
class KeyPair:
    """PEM-encoded RSA key pair; ``private_pem`` is what an app is configured with."""

    private_pem: str
    public_pem: str

    def __repr__(self) -> str:
        return "KeyPair(private_pem=<redacted>, public_pem=...)"


def generate_key_pair(bits: int = 2048) -> KeyPair:
    """Make a fresh RSA key pair (about 50 ms; prefer :func:`test_key_pair` when any key will do)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,  # "BEGIN RSA PRIVATE KEY", as GitHub hands them out
        serialization.NoEncryption(),
    ).decode()
    public_pem = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return KeyPair(private_pem=private_pem, public_pem=public_pem)


@functools.lru_cache(maxsize=8)
def test_key_pair(name: str = "app") -> KeyPair:
    """A key pair shared by the whole test session, one per ``name`` (generated once, on first use)."""
    return generate_key_pair()


test_key_pair.__test__ = False  # type: ignore[attr-defined]  # not a pytest test despite the name

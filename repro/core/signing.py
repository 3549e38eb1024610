"""Ed25519 keys and DSSE envelopes for `repro attest`, through securesystemslib (the `attest` extra).

The private key is a PKCS#8 PEM file that never leaves its host: created 0600 (O_EXCL, so an existing file is
never overwritten), read back only to sign, and never printed. Its public half sits beside it as `<key>.pub`
(a SubjectPublicKeyInfo PEM) for whoever verifies. Verifying needs a key the verifier trusts: the envelope's
own key id says only who claims to have signed.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.core.errors import InputError
from repro.core.safeio import read_text_bounded

KEY_NAME = "attest-ed25519.pem"
KEY_DIR = "keys"
MAX_KEY_BYTES = 16 << 10
MAX_ENVELOPE_BYTES = 64 << 20


class SignatureMismatch(Exception):
    """The envelope is well formed but its signature is not by the trusted key (or not over this payload)."""


@dataclass(frozen=True)
class KeyInfo:
    """Which key: its securesystemslib key id (sha256 of the canonical public key) and where it lives."""

    keyid: str
    path: Path
    public_path: Path | None
    created: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "keyid": self.keyid,
            "path": str(self.path),
            "public_key": str(self.public_path) if self.public_path else None,
            "created": self.created,
        }


def default_key_path(workspace_root: Path) -> Path:
    return Path(workspace_root) / KEY_DIR / KEY_NAME


def public_path_of(path: Path) -> Path:
    return path.with_name(path.name + ".pub")


def _read_pem(path: Path) -> bytes:
    try:
        return read_text_bounded(path, MAX_KEY_BYTES, what="key file").encode()
    except FileNotFoundError:
        raise InputError(f"{path}: no such key file.", "`repro attest RUN_DIR` (creates a key) or pass --key") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the key file ({exc}).", "pass --key a PEM key file") from None


def load_signer(path: Path) -> Any:
    """A CryptoSigner over the Ed25519 private key in `path`."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from securesystemslib.signer import CryptoSigner

    pem = _read_pem(path)
    try:
        key = load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        why = "it is encrypted" if "encrypted" in str(exc).lower() else "not an unencrypted PEM private key"
        raise InputError(f"{path}: cannot sign with this key ({why}).", "pass --key an Ed25519 PEM key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"{path}: not an Ed25519 private key.", "pass --key an Ed25519 PEM key") from None
    return CryptoSigner(key)


def load_public_key(path: Path) -> Any:
    """The securesystemslib key to trust, from a public key PEM or (its public half) a private key PEM."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
    from securesystemslib.signer import SSlibKey

    pem = _read_pem(path)
    public: Any
    try:
        public = load_pem_public_key(pem)
    except (ValueError, TypeError):
        try:
            private = load_pem_private_key(pem, password=None)
        except (ValueError, TypeError):
            raise InputError(f"{path}: not a PEM key.", "pass --key the signer's public key (KEY.pem.pub)") from None
        public = private.public_key() if isinstance(private, Ed25519PrivateKey) else private
    if not isinstance(public, Ed25519PublicKey):
        raise InputError(f"{path}: not an Ed25519 key.", "pass --key the signer's public key (KEY.pem.pub)")
    return SSlibKey.from_crypto(public)


def _public_pem(signer: Any) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return signer._private_key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create `path` with `mode` from the start (no window where it is readable by others); never overwrite."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(path, mode)


def key_for_signing(key: Path | None, workspace_root: Path, *, create: bool = True) -> tuple[Any | None, KeyInfo]:
    """(signer, info): `key` when given, else the workspace's key, generated on first use (0600) when `create`.

    With create=False (a dry run) a missing workspace key is named but not made; the signer is then None."""
    from securesystemslib.signer import CryptoSigner

    if key is not None:
        signer = load_signer(Path(key))
        pub = public_path_of(Path(key))
        return signer, KeyInfo(signer.public_key.keyid, Path(key), pub if pub.is_file() else None)
    path = default_key_path(workspace_root)
    if path.exists():
        signer = load_signer(path)
        pub = public_path_of(path)
        if not pub.exists():
            with contextlib.suppress(FileExistsError):
                _write_new(pub, _public_pem(signer), 0o644)
        return signer, KeyInfo(signer.public_key.keyid, path, pub)
    if not create:
        return None, KeyInfo("(generated on first use)", path, public_path_of(path), created=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    signer = CryptoSigner.generate_ed25519()
    try:
        _write_new(path, signer.private_bytes, 0o600)
    except FileExistsError:  # another `repro attest` made it a moment ago: sign with that one
        return key_for_signing(None, workspace_root, create=False)
    _write_new(public_path_of(path), _public_pem(signer), 0o644)
    return signer, KeyInfo(signer.public_key.keyid, path, public_path_of(path), created=True)


def trusted_key(key: Path | None, workspace_root: Path) -> tuple[Any, Path]:
    """The key a verification trusts: --key, else the workspace's own key; none is an input error."""
    if key is not None:
        return load_public_key(Path(key)), Path(key)
    path = default_key_path(workspace_root)
    pub = public_path_of(path)
    for candidate in (pub, path):
        if candidate.is_file():
            return load_public_key(candidate), candidate
    raise InputError(
        "no key to check the signature with: this workspace has no attestation key.",
        "`repro attest verify FILE --key SIGNER.pem.pub` with the signer's public key",
    )


def sign_envelope(payload: bytes, payload_type: str, signer: Any) -> dict[str, Any]:
    """The DSSE envelope (JSON form) of `payload`, signed over DSSE's pre-authentication encoding."""
    from securesystemslib.dsse import Envelope

    envelope = Envelope(payload, payload_type, {})
    envelope.sign(signer)
    return envelope.to_dict()


def read_envelope(path: Path) -> dict[str, Any]:
    """The decoded JSON of an attestation file; InputError (exit 2) when it cannot be read as one."""
    try:
        text = read_text_bounded(path, MAX_ENVELOPE_BYTES, what="attestation")
    except FileNotFoundError:
        raise InputError(f"{path}: no such attestation file.", "`repro attest RUN_DIR` writes one") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the attestation ({exc}).", "`repro attest RUN_DIR`") from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        ends = (
            isinstance(exc, json.JSONDecodeError)
            and bool(text.strip())
            and (exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip()) - 64)
        )
        what = "truncated: the JSON stops before it ends" if ends else f"not JSON: {str(exc)[:80]}"
        raise InputError(f"{path}: not a readable attestation ({what}).", "`repro attest RUN_DIR` again") from None
    if not isinstance(doc, dict) or not {"payload", "payloadType", "signatures"} <= set(doc):
        raise InputError(
            f"{path}: not a DSSE envelope (needs payload, payloadType and signatures).", "`repro attest RUN_DIR`"
        )
    return doc


def open_envelope(doc: dict[str, Any], key: Any, source: Path) -> tuple[bytes, str, str]:
    """(payload, payload type, key id) once a signature by `key` over the payload checks out.

    InputError for an envelope that is malformed; SignatureMismatch when no signature is by `key`, or none
    verifies (the payload or signature was changed)."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import FormatError, VerificationError

    try:
        sigs = doc["signatures"]
        if not isinstance(sigs, list) or not sigs or not all(isinstance(s, dict) for s in sigs):
            raise ValueError("no signatures")
        envelope = Envelope.from_dict(json.loads(json.dumps(doc)))
    except (KeyError, TypeError, ValueError, FormatError, binascii.Error) as exc:
        raise InputError(f"{source}: a malformed DSSE envelope ({exc}).", "`repro attest RUN_DIR` again") from None
    signed_by = sorted(envelope.signatures)
    if key.keyid not in signed_by:
        raise SignatureMismatch(
            f"signed by key {', '.join(k[:16] for k in signed_by)}, not by the trusted key {key.keyid[:16]}"
        )
    try:
        envelope.verify([key], 1)
    except VerificationError:
        raise SignatureMismatch(
            f"the signature by key {key.keyid[:16]} does not match the content: the attestation was edited"
        ) from None
    return envelope.payload, envelope.payload_type, key.keyid


def b64_payload(doc: dict[str, Any]) -> bytes:
    """The envelope's payload bytes without checking anything (for saying what an unverified file claims)."""
    try:
        return base64.b64decode(str(doc.get("payload", "")), validate=False)
    except (binascii.Error, ValueError):
        return b""

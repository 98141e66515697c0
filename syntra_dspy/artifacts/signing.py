"""An optional team signature on an artifact: HMAC-SHA256 over its checksum file with a key the team holds.

Checksums prove integrity (the files were written together and not changed since); anyone with this package
can recompute them. A signature made with a key kept in an environment variable proves that someone holding
the key approved exactly these bytes, so ``produce --artifact-key-env VAR`` can refuse anything else. The key
itself is never written anywhere.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from syntra_dspy.errors import ArtifactError, ConfigError
from syntra_dspy.outputs import atomic_write_text

SIGNATURE = "signature.hmac-sha256"
_SCHEME = "hmac-sha256"
_CONTEXT = b"syntra-dspy artifact signature v1\n"


def team_key(key_env: str) -> bytes:
    """The key held in ``$key_env``; unset or empty is a ConfigError naming the variable (never the value)."""
    value = os.environ.get(key_env, "")
    if not value:
        raise ConfigError(f"the environment variable {key_env} holding the team key is not set", field="key_env",
                          hint=f"export {key_env}=<the team's signing key>")
    return value.encode("utf-8")


def _mac(checksums: bytes, key: bytes) -> str:
    return hmac.new(key, _CONTEXT + checksums, hashlib.sha256).hexdigest()


def sign_artifact(path: str | Path, checksums_name: str, key_env: str) -> Path:
    """Write ``<artifact>/signature.hmac-sha256``; the caller has verified the artifact's integrity first."""
    path = Path(path)
    mac = _mac((path / checksums_name).read_bytes(), team_key(key_env))
    return atomic_write_text(path / SIGNATURE, f"{_SCHEME} {mac}\n")


def check_signature(path: str | Path, checksums_name: str, key_env: str) -> None:
    """Raise ArtifactError unless the artifact carries a signature made with the key in ``$key_env``."""
    path = Path(path)
    key = team_key(key_env)
    file = path / SIGNATURE
    if not file.is_file():
        raise ArtifactError("the artifact carries no team signature", path=path,
                            hint=f"sign it with `syntra artifacts sign {path} --key-env {key_env}` once reviewed")
    scheme, _, digest = file.read_text(encoding="utf-8").strip().partition(" ")
    expected = _mac((path / checksums_name).read_bytes(), key)
    if scheme != _SCHEME or not hmac.compare_digest(digest.encode("ascii", "replace"), expected.encode("ascii")):
        raise ArtifactError(f"the team signature does not match (made with another key than ${key_env}, or the "
                            "artifact changed after signing)", path=file,
                            hint="use the artifact as it was signed, or review it and sign it again")

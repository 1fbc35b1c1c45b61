"""Who may share a cached call: the namespace (``cache_scope``) of a request in ``llm_calls``.

A cached reply carries the time of the call that produced it, and that time decides whether a review is *sealed*
(written before the paper's reviews were public).  So a reply may only serve a request whose bytes provably come from
the same endpoint with the same credentials:

* ``None`` — the operator's candidates without a key (local model servers, keyless endpoints) and every
  scoring-side call (judges, panel, preprocessors: operator-side, their cache behaviour is unchanged): shared by
  every such request to the same endpoint (the endpoint is part of the request's key).  Rows written before
  migration m0018 that only operator candidates used stay here: the "unknown owner" rows only the operator reuses.
* ``credential:<fingerprint>`` — an operator request with an API key: shared only by requests with the same key at
  the same endpoint.  The fingerprint is HMAC-SHA256 of the key under a per-install secret (:data:`SECRET_FILE` in
  the data dir), so neither the key nor an unkeyed hash of it (which a guessed key could be checked against) is ever
  stored.
* ``owner:<who>`` — a submitted model's requests (``owner:submission:<id>``): never shared with anybody.

The key of a scoped request is derived from its scope and its canonical request (:func:`scoped_key`), so the same
request in two namespaces is two rows; the lookup also checks the row's ``cache_scope`` column, so a row that came
from elsewhere (a snapshot) or whose owner is unknown is never served.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

#: The per-install secret that keys credential fingerprints (hex, 0600, created on first use).
SECRET_FILE = "call-cache.secret"


def scoped_key(scope: str | None, base_key: str) -> str:
    """The cache key of a request in ``scope``: the canonical request's key itself when unscoped."""
    if scope is None:
        return base_key
    return hashlib.sha256(f"{scope}\n{base_key}".encode()).hexdigest()


def install_secret(data_path: Path) -> bytes:
    """The install's fingerprint secret, created atomically on first use (two processes agree on one)."""
    path = data_path / SECRET_FILE
    if not path.exists():
        data_path.mkdir(parents=True, exist_ok=True)
        tmp = data_path / f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
        try:
            os.link(tmp, path)  # fails if another process made it first: theirs is the one
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return bytes.fromhex(path.read_text().strip())


def credential_scope(data_path: Path, api_key_env: str | None) -> str | None:
    """The scope of an operator request whose key is in ``api_key_env`` (None: no key, the shared keyless class).

    A variable that is not set gets a scope of its own with no ok row in it (the call fails without its key): a
    missing key never reads the keyless class's replies.
    """
    if not api_key_env:
        return None
    key = os.environ.get(api_key_env)
    if not key:
        return f"credential:unset:{api_key_env}"
    digest = hmac.new(install_secret(data_path), key.encode(), hashlib.sha256).hexdigest()
    return f"credential:{digest}"


def owner_scope(owner: str) -> str:
    """The scope of a submitted model's requests: its own, shared with nobody."""
    return f"owner:{owner}"

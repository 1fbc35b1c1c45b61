"""Submitted API keys: encrypted at rest with the server key, or held only in this process's memory.

With ``GREBENCH_SECRET_KEY`` set (a Fernet key, ``Fernet.generate_key()``), a key is stored as a Fernet token in
the queue file and can be read by the scheduler process.  Without it the key lives only in the memory of the
process that received it (the app and the scheduler then have to run in one process);
a restart loses it and the submission fails with a reason that says so.  Keys are never returned to the
submitter, never logged (:class:`Secret` hides itself in ``repr``) and deleted when the evaluation ends.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

SECRET_KEY_ENV = "GREBENCH_SECRET_KEY"


class Secret:
    """A string that does not show itself in ``repr``/``str`` (so a stray log line or traceback cannot leak it)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The plain key, for the one place that sends it to the model's endpoint."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


class KeyUnreadable(ValueError):
    """A submission's stored key cannot be read with this process's ``GREBENCH_SECRET_KEY`` (a different key, or
    none): the ciphertext is kept so that the operator can fix the setting and run the queue again."""


class KeyVault:
    """Where submitted API keys live between submission and the end of their evaluation."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        server_key = env.get(SECRET_KEY_ENV, "").strip()
        self._fernet = None
        if server_key:
            from cryptography.fernet import Fernet

            try:
                self._fernet = Fernet(server_key.encode("ascii"))
            except (ValueError, UnicodeError):
                raise ValueError(f"{SECRET_KEY_ENV} is not a valid Fernet key (make one with "
                                 "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key())'`)"
                                 ) from None
        self._memory: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def encrypted_at_rest(self) -> bool:
        """Whether keys are stored encrypted (True) or held only in memory (False)."""
        return self._fernet is not None

    def seal(self, submission_id: str, key: str) -> str | None:
        """Keep ``key`` for a submission; return the ciphertext to store, or None when it stays in memory."""
        if not key:
            return None
        if self._fernet is not None:
            return self._fernet.encrypt(key.encode("utf-8")).decode("ascii")
        with self._lock:
            self._memory[submission_id] = key
        return None

    def open(self, submission_id: str, ciphertext: str | None) -> Secret | None:
        """The key of a submission, or None when it had none (or an in-memory key was lost with a restart).

        A stored ciphertext that this vault cannot decrypt raises :class:`KeyUnreadable` (a wrong or missing
        ``GREBENCH_SECRET_KEY``): that is the operator's error to fix, not a submission without a key.
        """
        if ciphertext:
            if self._fernet is None:
                raise KeyUnreadable(f"the submitted API key is stored encrypted but {SECRET_KEY_ENV} is not set in "
                                    "this process")
            from cryptography.fernet import InvalidToken

            try:
                return Secret(self._fernet.decrypt(ciphertext.encode("ascii")).decode("utf-8"))
            except (InvalidToken, UnicodeError):
                raise KeyUnreadable(f"the submitted API key cannot be decrypted with this {SECRET_KEY_ENV} (a "
                                    "different key from the one it was stored with?)") from None
        with self._lock:
            value = self._memory.get(submission_id)
        return None if value is None else Secret(value)

    def forget(self, submission_id: str) -> None:
        """Drop the in-memory copy (the stored ciphertext is deleted by the queue)."""
        with self._lock:
            self._memory.pop(submission_id, None)

"""Remove credentials from text before it is logged, printed or stored.

Error messages from HTTP clients quote the address they tried, and an address may carry credentials:
``http://user:PASSWORD@host/v1``, ``...?api_key=KEY``, or (once a client has mangled it) ``user:PASSWORD@host``.
:func:`redact` replaces userinfo, secret-looking query values, bearer tokens and every API key this process
has read (:func:`register_secret`) with ``***``, so none of them reaches a log, the terminal, the run store's
failures table or ``syntra export --failures``.
"""

from __future__ import annotations

import logging
import re
import threading

MASK = "***"
_SCHEME = r"[a-z][a-z0-9+.\-]*://"
# user:password@ after a scheme, or bare (a client that dropped the scheme); not "model:tag@http://..."
_USERINFO = re.compile(rf"(?P<scheme>{_SCHEME})(?P<info>[^\s/@'\"<>]+)@|(?<![\w:/.\-])(?P<bare>[^\s/@:'\"<>]+:"
                       rf"[^\s/@'\"<>]+)@(?!{_SCHEME})(?=[\w\-.\[])", re.IGNORECASE)
_QUERY = re.compile(r"(?P<name>[?&;][^=&\s#'\"]*(?:key|token|secret|passw|pwd|sig|auth|credential|session)"
                    r"[^=&\s#'\"]*)=(?P<value>[^&\s#'\"]+)", re.IGNORECASE)
_BEARER = re.compile(r"(?P<word>\bbearer\s+)[A-Za-z0-9._~+/=\-]{6,}", re.IGNORECASE)
_SECRETS: set[str] = set()
_LOCK = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember a key this process uses, so its literal value is masked wherever it would appear."""
    if value and len(value) >= 6:
        with _LOCK:
            _SECRETS.add(value)


def _userinfo(match: re.Match[str]) -> str:
    return f"{match['scheme']}{MASK}@" if match["scheme"] else f"{MASK}@"


def redact(text: str) -> str:
    """``text`` with credentials in URLs, bearer tokens and registered keys replaced by ``***``."""
    if not text:
        return text
    with _LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, MASK)
    text = _USERINFO.sub(_userinfo, text)
    text = _QUERY.sub(lambda m: f"{m['name']}={MASK}", text)
    return _BEARER.sub(lambda m: f"{m['word']}{MASK}", text)


class RedactingFilter(logging.Filter):
    """A logging filter (for the CLI's handlers) that redacts every record's formatted message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True

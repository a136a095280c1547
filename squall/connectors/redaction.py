"""Hiding passwords in the addresses connectors name in their messages and reprs.

Pure functions; run wherever a message or repr is made.
"""

from __future__ import annotations

import urllib.parse


def redact_url(url: str) -> str:
    """``url`` with its password, if any (``user:password@`` or a ``password`` query
    parameter), replaced by ``***`` (for error messages)."""
    parts = urllib.parse.urlsplit(url)
    redacted = url
    if parts.password is not None:
        netloc = parts.netloc.rsplit("@", 1)[1]
        user = parts.username or ""
        redacted = urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if any(name.lower() == "password" for name, _ in pairs):
        hidden = [(n, "***" if n.lower() == "password" else v) for n, v in pairs]
        head, _, tail = redacted.partition("?")
        _, hash_mark, fragment = tail.partition("#")
        redacted = f"{head}?{urllib.parse.urlencode(hidden, safe='*')}{hash_mark}{fragment}"
    return redacted


__all__ = ["redact_url"]

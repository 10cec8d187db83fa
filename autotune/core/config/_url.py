"""Storage URLs as every output shows them: with the password masked.

Here, below both sides, because a URL also reaches the user through the ``key=value`` errors
of this package; the storage, the study, the terminal, the report, the dashboard and the
follow-up commands all show a storage URL through :func:`display_url`.
"""

from __future__ import annotations

import re

__all__ = ["display_url"]

#: What a password is shown as (SQLAlchemy's ``render_as_string(hide_password=True)``).
_MASK = "***"
#: The value of a query parameter that can carry a secret (``?password=``, ODBC's ``PWD=``
#: inside ``odbc_connect=``, tokens): a driver reads the password from there too.
_SECRET_QUERY = re.compile(r"([?&][^=&]*(?:pass|pwd|secret|token|odbc_connect)[^=&]*=)[^&]*", re.I)


def _mask_text(text: str) -> str:
    """Mask what a URL SQLAlchemy cannot parse may hide: everything between ``://`` (or the
    start) and the last ``@`` (``user:password``, whatever its characters), and secret query
    values. Over-masking is the safe side."""
    head, at, tail = text.rpartition("@")
    if at:
        scheme, sep, _ = head.partition("://")
        text = f"{scheme}{sep}{_MASK}@{tail}" if sep else f"{_MASK}@{tail}"
    return _SECRET_QUERY.sub(rf"\g<1>{_MASK}", text)


def display_url(url: str) -> str:
    """A storage URL as it may be shown or logged: its password replaced by ``***``.

    A URL SQLAlchemy parses is rendered by it with the password hidden
    (``postgresql+psycopg://alice:***@db/x``; a URL without one is shown as given), and the
    values of query parameters that can carry a secret (``?password=``) are masked too. Text
    it cannot parse (a bad port, a typo in ``storage=``, an ``@`` left unescaped in the
    password) is masked from ``://`` to its last ``@``: a raw ``user:password@`` is never
    echoed. Commands printed for the user to copy show the masked URL, as pip's do.

    Args:
        url: a SQLAlchemy database URL, or any text that may hold one (a ``key=value``
            argument).

    Returns:
        The text to show.
    """
    # Imported here: the trial side imports this package too and never needs SQLAlchemy.
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        return _mask_text(url)
    if "@" in (parsed.host or ""):  # an unescaped "@" in the password: part of it is the host
        return _mask_text(url)
    return _SECRET_QUERY.sub(rf"\g<1>{_MASK}", parsed.render_as_string(hide_password=True))

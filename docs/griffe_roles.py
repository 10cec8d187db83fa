"""A griffe extension for the docs site's Python API page (docs/reference/python.md): the
docstrings' Sphinx roles (``:func:`name```, ``:class:`~pkg.Name```) are rendered as code, as
the name reads in the source, instead of showing the role's markup.

mkdocstrings-python loads it (``extensions:`` in mkdocs.yml) while griffe reads the sources;
the docstrings in the code are left as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: A Sphinx cross-reference role: ``:func:`autotune.study.api.run_study``` or, with ``~``, shown by
#: its last component (``:class:`~autotune.core.config.RunConfig``` reads ``RunConfig``).
ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def roles_as_code(text: str) -> str:
    """``text`` with every Sphinx role written as a Markdown code span of its target."""

    def code(match: re.Match[str]) -> str:
        tilde, target = match.groups()
        return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"

    return ROLE.sub(code, text)


class SphinxRolesAsCode(griffe.Extension):
    """Rewrite each object's docstring with :func:`roles_as_code` as griffe loads it."""

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = roles_as_code(obj.docstring.value)

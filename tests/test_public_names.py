"""The package face of autotune/config/: ``__all__`` lists every public name, once."""

from __future__ import annotations

import types

import autotune.config


def test_all_lists_every_public_name() -> None:
    public = {
        name
        for name in dir(autotune.config)
        if not name.startswith("_")
        and not isinstance(getattr(autotune.config, name), types.ModuleType)
    }

    assert set(autotune.config.__all__) == public
    assert len(autotune.config.__all__) == len(public)

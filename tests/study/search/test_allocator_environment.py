"""The trial's allocator setting (issue 49, CUDA item 6): ``cuda_expandable_segments: false``
turns the setting off even where the user's environment turns it on."""

from __future__ import annotations

from autotune.study.search._launcher import ALLOC_CONF_VARIABLE, allocator_environment


def test_off_overrides_the_users_expandable_segments_and_keeps_the_rest() -> None:
    environ = {ALLOC_CONF_VARIABLE: "max_split_size_mb:128,expandable_segments:True"}
    assert allocator_environment(environ, False) == {
        ALLOC_CONF_VARIABLE: "max_split_size_mb:128,expandable_segments:False"
    }


def test_on_replaces_the_users_setting_and_without_any_the_variable_is_left_alone() -> None:
    environ = {ALLOC_CONF_VARIABLE: "expandable_segments:False,max_split_size_mb:64"}
    assert allocator_environment(environ, True) == {
        ALLOC_CONF_VARIABLE: "max_split_size_mb:64,expandable_segments:True"
    }
    assert allocator_environment({}, False) == {ALLOC_CONF_VARIABLE: None}
    assert allocator_environment({ALLOC_CONF_VARIABLE: "max_split_size_mb:64"}, False) == {
        ALLOC_CONF_VARIABLE: "max_split_size_mb:64"
    }

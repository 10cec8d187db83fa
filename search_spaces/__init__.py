"""Search spaces shipped with autotune (YAML files; this package only holds data)."""

"""Space files shared by the config tests."""

from __future__ import annotations

#: A space with its own workload and knobs of every form: an integer range, a real range on a
#: log scale, a list of strings, and fixed values (a float, a boolean, an integer).
WORKLOAD_SPACE = """\
name: mine
workload: models/net.py:Net
workload_args: {vocab: 65}
model:
  layers: {low: 1, high: 4}
  lr_mult: {low: 1.0e-4, high: 1.0e-1, log: true}
  activation: [relu, gelu]
  dropout: 0.1
  bias: true
  heads: 4
batch_size: [32, 64]
"""

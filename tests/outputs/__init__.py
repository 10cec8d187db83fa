"""Checks of several outputs against each other: the terminal, the HTML report, the dashboard,
``best``, ``best --export``, ``trials --csv`` and ``ls`` say the same thing (the same table
columns and cells, the same verdict, the study's metric and knob names)."""

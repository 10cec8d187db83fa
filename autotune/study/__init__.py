"""The study process: search, storage, verification and reports.

- `api`: the one entry the CLI and Python users share (`run_study`, `verify_study`);
- `search`: the Optuna study, its objective, samplers and the launcher of trial processes;
- `verification`: the verdict on stored results;
- `storage`: the results tables beside Optuna's;
- `report`, `export`, `console`: the HTML report and dashboard, `best`/CSV, the terminal;
- `baseline`, `objectives`, `evidence`, `cost`, `trial_result`: the user's baseline, the
  objectives, the classes of change, a study's cost in full runs, one trial's figures typed.

It imports `autotune.trial` (to launch and measure trials) and `autotune.core`.
"""

__all__: list[str] = []  # a floor, not a face: its rooms are the faces

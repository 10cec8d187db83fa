"""Search spaces, run settings and ``key=value`` overrides, validated with pydantic.

A search space is a YAML file (``search_spaces/cnn_small.yaml``) that lists, for each knob,
the values the study may try, plus the fixed training settings. A knob is written as

- a single value: fixed (``precision: bf16``);
- a list, or ``{choices: [...]}``: categorical (``batch_size: [32, 64, 128]``);
- ``{low: 1, high: 4}`` with optional ``step`` and ``log``: an integer range.

Overrides use Hydra's ``key=value`` form (``train.epochs=2``, ``precision=[fp32,bf16]``);
OmegaConf parses each value. Every error is a :class:`~autotune.core.exceptions.ConfigError`
whose one-line message names the file or override, the key and the rule.

One private module per job, each importing only those above it in this list:
``_base`` (the strict base model), ``_knobs`` (knob parameter types and their Optuna
suggestions), ``_settings`` (fixed training, data, timing, mock, hardware and verification
settings), ``_space`` (the model's knobs, the workload reference, the search space), ``_run``
(what a run and each trial are given), ``_url`` (storage URLs as shown, password masked),
``_overrides`` (``key=value`` parsing) and ``_loading`` (YAML files, overrides and error
locations; an unknown key's message names the key it may have meant).

This package exports what users and autotune's other layers use; the rest (the knob
parameter types' helpers, each settings group's class, tuning constants) is the private
modules', which tests import directly.
"""

from autotune.core.config._knobs import (
    COMPILE_MODES,
    GUIDE_KNOB_DEFAULTS,
    GUIDE_KNOBS,
    MEMORY_FORMATS,
    OPTIMIZER_IMPLS,
    PRECISIONS,
    SYSTEM_KNOBS,
    TUNER_KNOBS,
    CategoricalParam,
    ChoiceParam,
    CompileModeParam,
    FloatParam,
    IntParam,
    MemoryFormatParam,
    ModelKnob,
    PrecisionParam,
    format_knob_value,
)
from autotune.core.config._loading import (
    load_run_config,
    load_space,
    load_verify_request,
    run_config_document,
)
from autotune.core.config._run import (
    DEFAULT_STORAGE_URL,
    ReusedMetric,
    RunConfig,
    TrialConfig,
    VerifyRequest,
    math_key,
)
from autotune.core.config._settings import (
    AdvancedSettings,
    BudgetOptions,
    BudgetSettings,
    CompileCache,
    Constraints,
    DataSettings,
    MockFault,
    MockSettings,
    ObjectiveMode,
    TrainSettings,
    VerifySettings,
    global_batch_reason,
    scaled_lr,
)
from autotune.core.config._space import (
    BUILTIN_BLOCKS,
    BUILTIN_FAMILIES,
    BUILTIN_WORKLOAD_REF,
    MetricSpec,
    ModelSpace,
    SearchSpace,
    WorkloadSpec,
)
from autotune.core.config._url import display_url

__all__ = [
    "BUILTIN_BLOCKS",
    "BUILTIN_FAMILIES",
    "BUILTIN_WORKLOAD_REF",
    "COMPILE_MODES",
    "DEFAULT_STORAGE_URL",
    "GUIDE_KNOBS",
    "GUIDE_KNOB_DEFAULTS",
    "MEMORY_FORMATS",
    "OPTIMIZER_IMPLS",
    "PRECISIONS",
    "SYSTEM_KNOBS",
    "TUNER_KNOBS",
    "AdvancedSettings",
    "BudgetOptions",
    "BudgetSettings",
    "CategoricalParam",
    "ChoiceParam",
    "CompileCache",
    "CompileModeParam",
    "Constraints",
    "DataSettings",
    "FloatParam",
    "IntParam",
    "MemoryFormatParam",
    "MetricSpec",
    "MockFault",
    "MockSettings",
    "ModelKnob",
    "ModelSpace",
    "ObjectiveMode",
    "PrecisionParam",
    "ReusedMetric",
    "RunConfig",
    "SearchSpace",
    "TrainSettings",
    "TrialConfig",
    "VerifyRequest",
    "VerifySettings",
    "WorkloadSpec",
    "display_url",
    "format_knob_value",
    "global_batch_reason",
    "load_run_config",
    "load_space",
    "load_verify_request",
    "math_key",
    "run_config_document",
    "scaled_lr",
]

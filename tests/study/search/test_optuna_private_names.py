"""The private Optuna and torch names autotune/study/search/_samplers/_gp.py reaches into are there,
with the signatures and behaviour it relies on.

Fails loudly when an Optuna or torch upgrade moves one of them: each check names the private
name and the installed versions (pyproject.toml pins optuna>=5.0,<5.1): read the new code
before moving the pin. Only ``_gp.py`` may use these names; the other sampler modules use
public APIs (checked last here).
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import optuna
import pytest
import torch

import autotune.study.search._samplers as samplers_package
from autotune.study.search._samplers import (
    LEAN_LOCAL_SEARCHES,
    LEAN_PRELIMINARY_SAMPLES,
    LEAN_QMC_SAMPLES_EHVI,
    LeanGPSampler,
)

VERSIONS = f"optuna {optuna.__version__}, torch {torch.__version__}"


def _gp() -> object:
    return importlib.import_module("optuna._gp.gp")


def _acqf() -> object:
    return importlib.import_module("optuna._gp.acqf")


def _gp_search_space() -> object:
    return importlib.import_module("optuna._gp.search_space")


def _gp_sampler_module() -> object:
    return importlib.import_module("optuna.samplers._gp.sampler")


def _parameters(function: Callable[..., object]) -> list[str]:
    return list(inspect.signature(function).parameters)


def _source(obj: object) -> str:
    return inspect.getsource(obj)  # type: ignore[arg-type]


def _check_version() -> None:
    version = tuple(int(p) for p in optuna.__version__.split(".")[:2])
    assert (5, 0) <= version < (5, 1), "outside the pinned range: check LeanGPSampler"


def _check_modules() -> None:
    for name in ("optuna._gp.gp", "optuna._gp.acqf", "optuna._gp.search_space"):
        importlib.import_module(name)
    assert hasattr(_gp_sampler_module(), "gp"), "no module global gp"


def _check_acquisition_effort() -> None:
    plain = optuna.samplers.GPSampler(seed=0)
    assert (
        plain._n_preliminary_samples,
        plain._n_local_search,
        plain._n_qmc_samples_ehvi,
    ) == (2048, 10, 128)


def _check_gprs_cache_list() -> None:
    assert optuna.samplers.GPSampler(seed=0)._gprs_cache_list is None


def _check_sample_relative_impl() -> None:
    plain = optuna.samplers.GPSampler(seed=0)
    assert _parameters(plain._sample_relative_impl) == [
        "study",
        "completed_trials",
        "running_trials",
        "search_space",
    ]
    source = _source(optuna.samplers.GPSampler._sample_relative_impl)
    # One GP per objective, fitted in order before the constraints' GPs, through the module.
    assert source.index("for i in range(n_objectives)") < source.index("gp.fit_kernel_params(")
    assert source.index("gp.fit_kernel_params(") < source.index("_get_constraints_acqf_args(")
    assert "self._gprs_cache_list = gprs_list" in source


def _check_module_global_gp() -> None:
    module = _gp_sampler_module()
    assert module.gp.fit_kernel_params is _gp().fit_kernel_params  # type: ignore[attr-defined]


def _check_optimize_acqf() -> None:
    plain = optuna.samplers.GPSampler(seed=0)
    assert _parameters(plain._optimize_acqf) == ["acqf", "best_params"]
    assert "self._optimize_acqf(acqf, best_params)" in _source(
        optuna.samplers.GPSampler._sample_relative_impl
    )


def _check_get_params() -> None:
    assert _parameters(_gp_sampler_module()._get_params) == ["trial"]  # type: ignore[attr-defined]


def _check_fit_kernel_params() -> None:
    fit = inspect.signature(_gp().fit_kernel_params).parameters  # type: ignore[attr-defined]
    # _fits_changed passes GPSampler's keyword arguments on, with Y less the prior mean.
    assert {"X", "Y"} <= set(fit)
    assert "X=normalized_params," in _source(optuna.samplers.GPSampler._sample_relative_impl)


def _check_base_acquisition_func() -> None:
    base = _acqf().BaseAcquisitionFunc  # type: ignore[attr-defined]
    assert _parameters(base.__init__) == ["self", "length_scales", "search_space"]
    assert callable(base.eval_acqf)
    init = _source(base.__init__)
    assert "self.length_scales = " in init and "self.search_space = " in init


def _check_gp_regressor_posterior() -> None:
    gp = _gp()
    # A prior mean rides on posterior (every acquisition reads the mean there) and on
    # append_running_data (the Kriging believer's values of running trials).
    regressor = gp.GPRegressor  # type: ignore[attr-defined]
    assert _parameters(regressor.posterior) == ["self", "x", "joint"]
    assert _parameters(regressor.append_running_data) == ["self", "X_running", "y_running"]
    acqf_source = _source(_acqf())
    assert ".posterior(" in acqf_source and "append_running_data(" in acqf_source
    assert "self._gpr.posterior(" in _source(gp.ConditionalGPRegressor)  # type: ignore[attr-defined]


def _check_gp_regressor_new_and_dict() -> None:
    """``_fits_changed`` makes its GP with ``GPRegressor.__new__`` and copies a fitted GP's
    ``__dict__``."""
    from autotune.study.search._samplers._gp import _ChangedGPRegressor

    rng = np.random.default_rng(0)
    plain = optuna.samplers.GPSampler(seed=0)
    fitted = _gp().fit_kernel_params(  # type: ignore[attr-defined]
        X=rng.random((5, 2)),
        Y=rng.standard_normal(5),
        is_categorical=np.array([False, False]),
        log_prior=plain._log_prior,
        minimum_noise=plain._minimum_noise,
        deterministic_objective=False,
        gpr_cache=None,
    )
    assert not hasattr(type(fitted), "__slots__") and vars(fitted)
    changed = _ChangedGPRegressor.__new__(_ChangedGPRegressor)
    changed.__dict__.update(vars(fitted))
    changed._prior = None
    mean, var = changed.posterior(torch.zeros(1, 2, dtype=torch.float64))
    assert mean.shape == var.shape == (1,)


def _check_search_space() -> None:
    space_class = _gp_search_space().SearchSpace  # type: ignore[attr-defined]
    # Normalized inputs decode to parameters through the GP's search space.
    assert callable(space_class.get_unnormalized_param)
    assert callable(space_class.get_normalized_params)
    space = space_class({"x": optuna.distributions.CategoricalDistribution([1, 2])})
    assert list(space.is_categorical) == [True]


def _check_standardize_values() -> None:
    # Standardized as (sign * values - mean) / std with the population std (ddof 0).
    standardized, _, stds = _gp_sampler_module()._standardize_values(  # type: ignore[attr-defined]
        np.array([[1.0], [3.0]])
    )
    assert list(standardized[:, 0]) == [-1.0, 1.0] and stds[0] == 1.0


def _check_disable_torch_function() -> None:
    # Proposals run with torch functions off (GPSampler's torch.device("cpu") mode skipped).
    assert callable(torch._C.DisableTorchFunction)
    assert 'with torch.device("cpu"):' in _source(optuna.samplers.GPSampler.sample_relative)


def _check_fixed_params_attr() -> None:
    from autotune.study.search._samplers._values import FIXED_PARAMS_ATTR, fixed_params

    study = optuna.create_study()
    study.enqueue_trial({"x": 3})
    trial = study.ask()
    frozen = study.trials[trial.number]
    assert frozen.system_attrs[FIXED_PARAMS_ATTR] == {"x": 3} == fixed_params(frozen)


#: Each private name (or group of names) autotune/study/search/_samplers/_gp.py uses, and its check.
CHECKS: dict[str, Callable[[], None]] = {
    "optuna.__version__ in [5.0, 5.1)": _check_version,
    "optuna._gp.{gp,acqf,search_space}, optuna.samplers._gp.sampler": _check_modules,
    "GPSampler._n_preliminary_samples/_n_local_search/_n_qmc_samples_ehvi": (
        _check_acquisition_effort
    ),
    "GPSampler._gprs_cache_list": _check_gprs_cache_list,
    "GPSampler._sample_relative_impl": _check_sample_relative_impl,
    "optuna.samplers._gp.sampler.gp (module global)": _check_module_global_gp,
    "GPSampler._optimize_acqf": _check_optimize_acqf,
    "optuna.samplers._gp.sampler._get_params": _check_get_params,
    "optuna._gp.gp.fit_kernel_params": _check_fit_kernel_params,
    "optuna._gp.acqf.BaseAcquisitionFunc": _check_base_acquisition_func,
    "GPRegressor.posterior/append_running_data": _check_gp_regressor_posterior,
    "GPRegressor.__new__/__dict__": _check_gp_regressor_new_and_dict,
    "optuna._gp.search_space.SearchSpace": _check_search_space,
    "optuna.samplers._gp.sampler._standardize_values": _check_standardize_values,
    "torch._C.DisableTorchFunction": _check_disable_torch_function,
    "Study.enqueue_trial's system attribute fixed_params (every sampler module)": (
        _check_fixed_params_attr
    ),
}


@pytest.mark.parametrize("name", list(CHECKS))
def test_the_private_name_is_there(name: str) -> None:
    try:
        CHECKS[name]()
    except (AssertionError, AttributeError, ImportError, TypeError, ValueError, OSError) as e:
        pytest.fail(
            f"{name}: missing or changed under {VERSIONS} ({type(e).__name__}: {e}); "
            "autotune/study/search/_samplers/_gp.py relies on it: read the new code before moving "
            "the pin (pyproject.toml: optuna>=5.0,<5.1)",
            pytrace=False,
        )


def test_lean_gp_sets_its_acquisition_effort() -> None:
    lean = LeanGPSampler(seed=0)
    assert (lean._n_preliminary_samples, lean._n_local_search, lean._n_qmc_samples_ehvi) == (
        LEAN_PRELIMINARY_SAMPLES,
        LEAN_LOCAL_SEARCHES,
        LEAN_QMC_SAMPLES_EHVI,
    )
    assert (LEAN_PRELIMINARY_SAMPLES, LEAN_LOCAL_SEARCHES, LEAN_QMC_SAMPLES_EHVI) == (256, 3, 32)


#: What marks a private Optuna or torch name in source: a private optuna module, or a
#: private attribute of torch.
_PRIVATE = re.compile(
    r"optuna\._|optuna\.samplers\._|torch\._|_sample_relative_impl|_optimize_acqf"
)


def test_only_the_gp_module_touches_private_names() -> None:
    folder = Path(samplers_package.__file__).parent
    touching = sorted(
        path.name
        for path in folder.glob("*.py")
        if path.name != "_gp.py" and _PRIVATE.search(path.read_text(encoding="utf-8"))
    )
    assert touching == [], f"private Optuna/torch names outside _gp.py: {touching}"

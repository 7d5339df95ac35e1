"""Reading settings from the environment: a value that is not of its kind, or out of its range,
stops start-up with an error naming the variable, the value and what it must be."""

import math
import os

from django.core.exceptions import ImproperlyConfigured


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int, *, least: int, most: int | None = None) -> int:
    """The integer `name` holds (`default` if unset or blank), from `least` to `most`."""
    value = os.environ.get(name, "")
    try:
        number = int(value) if value.strip() else default
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc
    _check_range(name, number, least=least, most=most)
    return number


def env_float(name: str, default: float, *, least: float | None = None, above: float | None = None) -> float:
    """The finite number `name` holds (`default` if unset or blank), at least `least` or greater
    than `above`."""
    value = os.environ.get(name, "")
    problem = ImproperlyConfigured(f"{name} must be a number, got {value!r}")
    try:
        number = float(value) if value.strip() else default
    except ValueError as exc:
        raise problem from exc
    if not math.isfinite(number):  # "nan" and "inf" parse, and would break a timeout or a delay
        raise problem
    if above is not None and not number > above:
        raise ImproperlyConfigured(
            f"{name} must be greater than {_number(above)}, got {_shown(name, number)}"
        )
    _check_range(name, number, least=least, most=None)
    return number


def _check_range(name: str, number: float, *, least: float | None, most: float | None) -> None:
    if (least is None or number >= least) and (most is None or number <= most):
        return
    if least is not None and most is not None:
        wanted = f"from {_number(least)} to {_number(most)}"
    elif least is not None:
        wanted = f"at least {_number(least)}"
    else:
        wanted = f"at most {_number(most)}"
    raise ImproperlyConfigured(f"{name} must be {wanted}, got {_shown(name, number)}")


def _shown(name: str, number: float) -> str:
    """The value as it was set (a default out of range is the code's fault, and says so)."""
    value = os.environ.get(name, "")
    return repr(value) if value.strip() else f"the default {_number(number)}"


def _number(value: float | None) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"

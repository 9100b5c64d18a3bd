"""Checks of numeric settings, with one wording for every command, config file and caller.

A setting names its range (``">= 1"``, ``"in (0, 1]"``...) and :func:`check_number` refuses,
with a ``ValueError`` naming the setting, anything else: the wrong kind (a bool, a string from
a config file, a float where an integer is meant), nan, an infinity, or a value out of range.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

#: The ranges a setting may name. Every number must also be finite.
RANGES: dict[str, Callable[[float], bool]] = {
    "finite": math.isfinite,
    "> 0": lambda x: x > 0,
    ">= 0": lambda x: x >= 0,
    ">= 1": lambda x: x >= 1,
    "in [0, 1]": lambda x: 0 <= x <= 1,
    "in (0, 1]": lambda x: 0 < x <= 1,
    "in [0, 1)": lambda x: 0 <= x < 1,
    "in (0, 1)": lambda x: 0 < x < 1,
}


def check_number(name: str, value: Any, valid: str = "finite", *, integer: bool = False,
                 optional: bool = False) -> None:
    """Raise a ``ValueError`` naming ``name`` unless ``value`` is a finite number in the range
    ``valid`` (a key of :data:`RANGES`), an integer when ``integer`` (a Python or NumPy one),
    or None when ``optional``."""
    if value is None and optional:
        return
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ValueError(f"{name} must be {'an integer' if integer else 'a number'}, "
                         f"not {short_repr(value)}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, not {value!r}")
    if not RANGES[valid](value):
        raise ValueError(f"{name} must be {valid}, not {short_repr(value)}")


def short_repr(value: Any, n: int = 60) -> str:
    """``repr(value)`` cut to ``n`` characters (then "..."): an error message quotes what it
    refuses without repeating a huge input back."""
    text = repr(value)
    return text if len(text) <= n else text[:n] + "..."

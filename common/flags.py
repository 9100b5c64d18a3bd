"""Command-line flag types shared by every ``gagpo`` command."""

from __future__ import annotations

import argparse
import json
from typing import Any


def json_object(text: str) -> dict[str, Any]:
    """A flag's JSON object (``--env-kwargs '{"observation_mode": "text_rich"}'``); argparse
    turns a refusal into a usage error naming the flag."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON ({e}): {text!r}") from e
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"not a JSON object ({{\"key\": value, ...}}): "
                                         f"{text!r}")
    return value

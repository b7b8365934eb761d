"""The template expressions the offline audit resolves (`files.py`): `[parameters('p')]` and
`[concat(...)]` of parameters and literals, with the parameters' default values or the values a
nested deployment passes; any other expression is refused, never guessed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from blob_safetynet.policies.rules.model import ARM_IGNORECASE, arm_fold
from blob_safetynet.settings.redaction import printable

_PARAMETER: Final = re.compile(r"parameters\('([^']+)'\)", ARM_IGNORECASE)
_EXPRESSION: Final = re.compile(
    r"\[(?:parameters\('[^']+'\)|concat\((?:parameters\('[^']+'\)|'[^']*')"
    r"(?:\s*,\s*(?:parameters\('[^']+'\)|'[^']*'))*\))\]",
    ARM_IGNORECASE,
)


class OfflineError(ValueError):
    """A file cannot be read or holds no shape the offline audit knows; the message names it."""


@dataclass(frozen=True)
class Passed:
    """A nested template's parameter value given as an expression: evaluated, when a name
    needs it, in the scope of the template that holds the deployment."""

    expression: str
    scope: Mapping[str, object]


def resolve(expression: str, parameters: Mapping[str, object], source: str) -> str:
    """`[parameters('p')]` or `[concat(parameters('p'), '/default')]` with the parameters'
    default values (`parameters` keyed in lower case: template functions and their arguments
    are case-insensitive); any other expression cannot be judged offline."""
    if not _EXPRESSION.fullmatch(expression):
        raise OfflineError(
            f"{source}: cannot resolve the name '{printable(expression)}' offline; only "
            "parameters('...') and concat(...) of them and literals are read"
        )
    inner = expression[1:-1]
    parts = re.findall(r"parameters\('[^']+'\)|'[^']*'", inner, ARM_IGNORECASE)
    text = ""
    for part in parts:
        if part.startswith("'"):
            text += part[1:-1]
            continue
        key = _PARAMETER.fullmatch(part)
        value = parameters.get(arm_fold(key.group(1))) if key else None
        if isinstance(value, Passed):
            value = resolve(value.expression, value.scope, source)
        if not isinstance(value, str):
            raise OfflineError(
                f"{source}: the parameter in '{printable(expression)}' has no string default value"
            )
        text += value
    return text

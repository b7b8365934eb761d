"""ARM JSON as Resource Manager reads it: property names without regard to ASCII case.

Resource Manager and its resource providers are .NET services whose JSON binding matches
property names case-insensitively (the ASP.NET web default,
https://learn.microsoft.com/dotnet/standard/serialization/system-text-json/character-casing),
so `PublicAccess`, `Properties` and `IsHnsEnabled` deploy as `publicAccess`, `properties` and
`isHnsEnabled`; template functions are case-insensitive too
(https://learn.microsoft.com/azure/azure-resource-manager/templates/template-expressions).
That ignore-case is .NET's ordinal one, which folds A-Z and never maps a non-ASCII letter to an
ASCII one (`ß`, the long s and the Kelvin sign stay themselves): `rules.model.arm_fold` is that one
rule, with its references, and every name and enum value here is compared through it.
A saved file is read the same way: every object becomes an `ArmObject`, whose lookups ignore
ASCII case at every level. An object holding one property in two spellings (or twice in one)
has no single meaning ARM would give it, so it is refused, both spellings named.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from blob_safetynet.policies.rules.model import arm_fold
from blob_safetynet.settings.redaction import printable


class SpellingError(ValueError):
    """One object holds the same property twice, in one or two spellings."""


class ArmObject(Mapping[str, Any]):
    """A JSON object whose keys are looked up without regard to case; iteration gives the
    spellings of the file."""

    __slots__ = ("_items", "_spelling")

    def __init__(self, pairs: list[tuple[str, Any]] | Mapping[str, Any]) -> None:
        items = list(pairs.items()) if isinstance(pairs, Mapping) else pairs
        self._items: dict[str, Any] = {}
        self._spelling: dict[str, str] = {}
        for key, value in items:
            folded = arm_fold(key)
            if folded in self._spelling:
                first = self._spelling[folded]
                raise SpellingError(
                    f"the property {_quoted(first)} is given twice in one object "
                    f"(as {_quoted(first)} and {_quoted(key)}); ARM reads property names "
                    "without regard to case, so which one applies cannot be told"
                )
            self._spelling[folded] = key
            self._items[key] = value

    def __getitem__(self, key: str) -> Any:
        return self._items[self._spelling[arm_fold(key)]]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and arm_fold(key) in self._spelling

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"ArmObject({self._items!r})"

    def spelling(self, key: str) -> str | None:
        """The file's spelling of `key`, None when absent."""
        return self._spelling.get(arm_fold(key))

    def replaced(self, key: str, value: Any) -> ArmObject:
        """A copy with `key` (in whichever spelling it has) set to `value`."""
        spelt = self.spelling(key) or key
        return self._like([(k, v) for k, v in self._items.items() if k != spelt] + [(key, value)])

    def _like(self, pairs: list[tuple[str, Any]]) -> ArmObject:
        """A new object of this one's kind (a subclass may carry more than the pairs)."""
        return type(self)(pairs)


def _quoted(key: str) -> str:
    return f"'{printable(key)}'"


def enum(value: Any, choices: tuple[str, ...]) -> Any:
    """`value` in the REST spec's spelling when it is one of `choices` but for ASCII case, else
    as given: an unknown value (`TLS1_2` spelt with a long s, U+017F, is no TLS version) is
    judged as it is."""
    if not isinstance(value, str):
        return value
    folded = arm_fold(value)
    return next((choice for choice in choices if arm_fold(choice) == folded), value)

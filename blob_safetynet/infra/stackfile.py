"""A stack's configuration file, `Pulumi.<stack>.yaml`, read offline for `safetynet config check`.

Pulumi keeps a stack's configuration in that file's `config:` map, each key namespaced
`<project>:<key>`, a value set with `--secret` written as `{secure: <ciphertext>}` (encrypted
leaves inside a structured value too), and structured values as YAML lists and maps
(https://www.pulumi.com/docs/iac/concepts/config/). Without the stack's secrets provider a
secret's value cannot be read, only that it is set. Keys of other namespaces (a provider's
`azure-native:location`) are the provider's, listed and left alone; a namespace one typo away
from this program's is refused, since its keys would silently not apply.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml

from blob_safetynet.infra.config import NAMESPACE
from blob_safetynet.settings import untrusted
from blob_safetynet.settings.redaction import printable

MAX_BYTES: Final = 1_000_000
"""A stack file holds some dozens of keys and a few ciphertexts: a few kB."""
_STACK_FILE: Final = re.compile(r"Pulumi\.(?P<stack>[^/]+)\.ya?ml")


class StackFileError(ValueError):
    """The file cannot be read, or is not a stack's configuration file; the message says why."""


@dataclass(frozen=True)
class StackFile:
    """This program's keys of one stack's configuration file."""

    path: Path
    stack: str
    raw: dict[str, object]
    """Key (namespace removed) -> value, as the file types it; a secret's value is None."""
    secrets: frozenset[str]
    """Keys whose value is (or holds) a `secure:` ciphertext."""
    others: tuple[str, ...]
    """Keys of other namespaces, as written."""


def stack_name(path: Path) -> str:
    """`Pulumi.dev.yaml` -> `dev`; StackFileError for a name Pulumi does not give a stack file."""
    match = _STACK_FILE.fullmatch(path.name)
    if match is None:
        raise StackFileError(
            f"{printable(str(path))}: not a stack configuration file (Pulumi.<stack>.yaml)"
        )
    return match["stack"]


def read(path: Path) -> StackFile:
    """The file's keys in this program's namespace."""
    shown = printable(str(path))
    stack = stack_name(path)
    try:
        data = untrusted.read_input(path, shown, max_bytes=MAX_BYTES)
        document = yaml.safe_load(data.decode("utf-8"))
    except untrusted.UntrustedInputError as error:
        raise StackFileError(str(error)) from None
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError):
        raise StackFileError(f"{shown}: not YAML") from None
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise StackFileError(f"{shown}: a stack file is a YAML mapping (with a `config:` map)")
    config = document.get("config") or {}
    if not isinstance(config, Mapping):
        raise StackFileError(f"{shown}: `config` is not a mapping of keys to values")
    raw: dict[str, object] = {}
    secrets: set[str] = set()
    others: list[str] = []
    for full_key, value in config.items():
        namespace, key = _split(full_key, shown)
        if namespace != NAMESPACE:
            _not_a_typo(namespace, full_key, shown)
            others.append(full_key)
            continue
        if _holds_secret(value):
            secrets.add(key)
            raw[key] = None
        else:
            raw[key] = value
    return StackFile(path, stack, raw, frozenset(secrets), tuple(others))


def _split(full_key: object, shown: str) -> tuple[str, str]:
    if not isinstance(full_key, str) or ":" not in full_key:
        raise StackFileError(
            f"{shown}: config key {printable(str(full_key))!r} has no namespace "
            f"(write {NAMESPACE}:<key>)"
        )
    namespace, _, key = full_key.partition(":")
    return namespace, key


def _not_a_typo(namespace: str, full_key: str, shown: str) -> None:
    if difflib.SequenceMatcher(None, namespace.casefold(), NAMESPACE).ratio() >= 0.8:
        raise StackFileError(
            f"{shown}: config key {printable(full_key)!r} is in namespace "
            f"{printable(namespace)!r}, not this program's {NAMESPACE!r}: did you mean "
            f"{NAMESPACE}:{printable(full_key.partition(':')[2])}?"
        )


def _holds_secret(value: object) -> bool:
    """A `secure:` ciphertext, or a structured value with one inside."""
    if isinstance(value, Mapping):
        if set(value) == {"secure"}:
            return True
        return any(_holds_secret(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_secret(item) for item in value)
    return False

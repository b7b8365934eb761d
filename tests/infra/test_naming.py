"""Every name the program registers is one ARM accepts for its type (mocks cannot see ARM's rules)."""

from __future__ import annotations

import pytest

from blob_safetynet.infra.naming import (
    AUTONAME_SUFFIX_LENGTH,
    NAME_INPUTS,
    NAME_RULES,
    conforms,
    stack_names,
)
from tests.infra.conftest import RunFactory
from tests.infra.harness import SUBSCRIPTION_ID, RegisteredResource, StackRun

GUID_NAMED = {
    "azure-native:authorization:RoleDefinition",
    "azure-native:authorization:RoleAssignment",
}
"""azure-native names these with a generated GUID, always valid."""
CHILD_OF_SITE = {
    "azure-native:web:WebAppApplicationSettings",
    "azure-native:web:WebAppFtpAllowed",
    "azure-native:web:WebAppScmAllowed",
}
"""Singleton sub-resources of the site: their `name` input is the site's name."""
WORST_AUTONAME_SUFFIX = "f" * AUTONAME_SUFFIX_LENGTH


def arm_name(res: RegisteredResource) -> str:
    """The name ARM receives: the explicit input, or azure-native's auto-name (logical + 8 hex)."""
    explicit = res.inputs.get(NAME_INPUTS[res.type])
    return str(explicit) if explicit else res.name + WORST_AUTONAME_SUFFIX


def azure_resources(run: StackRun) -> list[RegisteredResource]:
    return [
        res
        for res in run.resources
        if res.custom
        and res.type.startswith("azure-native:")
        and res.type not in GUID_NAMED | CHILD_OF_SITE
    ]


def test_every_registered_azure_type_has_a_naming_rule(stack: StackRun) -> None:
    """A new resource type fails here until its ARM naming rule is added to blob_safetynet/infra/naming.py."""
    assert {res.type for res in azure_resources(stack)} <= set(NAME_RULES)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {
            "containerName": "a-b-c",
            "verifierPrincipalIds": ["aaaaaaaa-0000-0000-0000-000000000001"],
        },
    ],
    ids=["defaults", "other-container"],
)
def test_every_registered_name_is_valid_for_its_type(run: RunFactory, overrides: dict) -> None:
    """Storage accounts, vault, app, plan, identity, workspace and the rest pass ARM's rules."""
    bad = [
        (res.type, res.name, arm_name(res))
        for res in azure_resources(run(overrides))
        if not conforms(res.type, arm_name(res))
    ]
    assert bad == []


def test_the_rules_refuse_the_names_main_registered() -> None:
    """`sweeper-runtime` + 8 hex (azure-native's auto-name) is no storage account name."""
    assert not conforms("azure-native:storage:StorageAccount", "sweeper-runtime0a1b2c3d")
    assert not conforms("azure-native:storage:StorageAccount", "Safetynet0a1b2c3d")
    assert not conforms("azure-native:keyvault:Vault", "kv--double")
    assert not conforms("azure-native:keyvault:Vault", "1starts-with-digit")
    assert not conforms("azure-native:web:WebApp", "-leading-hyphen")
    assert conforms("azure-native:storage:StorageAccount", "safetynet0a1b2c3d")


@pytest.mark.parametrize(
    "stack",
    ["dev", "", "Prod_EU-West.2", "a-very-long-stack-name-with-many-parts-1234567890"],
)
def test_derived_names_are_valid_for_any_stack_name(stack: str) -> None:
    """Whatever the stack is called, the derived names fit their types' rules and lengths."""
    names = stack_names("blob-safetynet", stack, SUBSCRIPTION_ID)
    assert conforms("azure-native:storage:StorageAccount", names.data_account)
    assert conforms("azure-native:storage:StorageAccount", names.runtime_account)
    assert conforms("azure-native:keyvault:Vault", names.key_vault)
    assert conforms("azure-native:web:WebApp", names.function_app)
    assert names.data_account != names.runtime_account


def test_derived_names_are_stable_per_stack_and_differ_across_subscriptions() -> None:
    """The same stack keeps its names; another subscription or stack gets other global names."""
    first = stack_names("blob-safetynet", "dev", SUBSCRIPTION_ID)
    assert stack_names("blob-safetynet", "dev", SUBSCRIPTION_ID) == first
    other_sub = stack_names("blob-safetynet", "dev", "11111111-0000-0000-0000-000000000000")
    other_stack = stack_names("blob-safetynet", "dev2", SUBSCRIPTION_ID)
    for other in (other_sub, other_stack):
        assert other.data_account != first.data_account
        assert other.key_vault != first.key_vault
        assert other.function_app != first.function_app

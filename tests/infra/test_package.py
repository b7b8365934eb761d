"""The package publish signs in as azure-native does and refuses any other identity."""

from __future__ import annotations

import base64
import json

import pytest

from infra.package import (
    DeployerIdentityError,
    check_same_identity,
    choose_credential,
    deployment_finished,
    publish_url,
    token_object_id,
)

DEPLOYER = "00000000-0000-0000-0000-0000000000cc"
OTHER = "00000000-0000-0000-0000-0000000000dd"
TENANT = "00000000-0000-0000-0000-0000000000bb"
CLIENT = "00000000-0000-0000-0000-0000000000ee"
SECRET = "s3cr3t-value"


def fake_token(claims: dict[str, object]) -> str:
    def part(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.signature"


@pytest.mark.parametrize(
    ("env", "kind"),
    [
        ({}, "cli"),
        (
            {"ARM_CLIENT_ID": CLIENT, "ARM_CLIENT_SECRET": SECRET, "ARM_TENANT_ID": TENANT},
            "client_secret",
        ),
        (
            {
                "ARM_CLIENT_ID": CLIENT,
                "ARM_CLIENT_CERTIFICATE_PATH": "/certs/sp.pem",
                "ARM_TENANT_ID": TENANT,
            },
            "client_certificate",
        ),
        ({"ARM_USE_MSI": "true", "ARM_CLIENT_ID": CLIENT}, "managed_identity"),
        (
            {
                "ARM_USE_OIDC": "true",
                "ARM_OIDC_TOKEN_FILE_PATH": "/var/run/token",
                "ARM_CLIENT_ID": CLIENT,
                "ARM_TENANT_ID": TENANT,
            },
            "oidc_token_file",
        ),
    ],
    ids=["az-login", "secret", "certificate", "msi", "oidc"],
)
def test_the_credential_follows_the_arm_variables_azure_native_reads(
    env: dict[str, str], kind: str
) -> None:
    """ARM_* decide the credential, as they decide azure-native's login; AZURE_* play no part."""
    choice = choose_credential({**env, "AZURE_CLIENT_ID": OTHER, "AZURE_CLIENT_SECRET": "x"})
    assert choice.kind == kind
    if kind not in ("cli", "managed_identity"):
        assert (choice.tenant_id, choice.client_id) == (TENANT, CLIENT)
    assert SECRET not in repr(choice)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ARM_CLIENT_ID": CLIENT}, "without ARM_CLIENT_SECRET"),
        ({"ARM_CLIENT_SECRET": SECRET, "ARM_TENANT_ID": TENANT}, "ARM_CLIENT_ID is not"),
        ({"ARM_USE_OIDC": "true", "ARM_CLIENT_ID": CLIENT}, "ARM_OIDC_TOKEN_FILE_PATH"),
    ],
)
def test_an_incomplete_login_is_refused_with_the_missing_variable(
    env: dict[str, str], message: str
) -> None:
    """A half-configured service principal stops the publish, naming what is missing, no secret."""
    with pytest.raises(DeployerIdentityError, match=message) as error:
        choose_credential(env)
    assert SECRET not in str(error.value)


def test_a_token_of_another_identity_is_refused() -> None:
    """The publish stops when the token's oid is not the deployer azure-native reported."""
    check_same_identity(fake_token({"oid": DEPLOYER.upper()}), DEPLOYER)
    with pytest.raises(DeployerIdentityError, match=f"object id {OTHER}.*deploys as {DEPLOYER}"):
        check_same_identity(fake_token({"oid": OTHER}), DEPLOYER)


@pytest.mark.parametrize("token", ["not-a-jwt", fake_token({"sub": "x"}), "a.!!!.c"])
def test_a_token_without_an_oid_is_refused(token: str) -> None:
    """A token whose object id cannot be read never counts as the deployer's."""
    with pytest.raises(DeployerIdentityError):
        token_object_id(token)


def test_the_publish_goes_to_the_one_deploy_endpoint_of_the_scm_host() -> None:
    """One deploy is `POST https://<scm host>/api/publish`; a missing host is an error."""
    assert publish_url("app.scm.azurewebsites.net") == (
        "https://app.scm.azurewebsites.net/api/publish?RemoteBuild=false"
    )
    with pytest.raises(RuntimeError, match="SCM"):
        publish_url("")


def test_deployment_status_is_read_as_kudu_reports_it() -> None:
    """Status 4 is done, 3 is a failure with its text, anything else is still running."""
    assert deployment_finished({"status": 4}) is True
    assert deployment_finished({"status": 1}) is False
    with pytest.raises(RuntimeError, match="bad package"):
        deployment_finished({"status": 3, "status_text": "bad package"})

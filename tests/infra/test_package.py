"""The package publish signs in as azure-native does and refuses any other identity."""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from blob_safetynet.infra.package import (
    PROPAGATION_DELAYS,
    DeployerIdentityError,
    Retry,
    check_same_identity,
    choose_credential,
    deployment_finished,
    publish,
    publish_url,
    token_object_id,
)
from testkit.tls import make_tls_files

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


@pytest.mark.parametrize("code", [-1, 3, 5, 6, None])
def test_a_deployment_that_ends_otherwise_than_success_is_an_error(code: object) -> None:
    """Cancelled, failed, conflict, partial success or no status stop the update with the text."""
    with pytest.raises(RuntimeError, match="bad package"):
        deployment_finished({"status": code, "status_text": "bad package"})


def test_pending_building_and_deploying_mean_wait_and_4_means_done() -> None:
    """Kudu's running codes 0-2 keep polling; 4 is success."""
    assert [deployment_finished({"status": code}) for code in (0, 1, 2, 4)] == [
        False,
        False,
        False,
        True,
    ]


TOKEN = "header.payload.signature"
DEPLOYMENT_ID = "3f394416-b25a-4e42-aa01-02a1f011772e"
PREVIOUS_ID = "0c1d2e3f-0000-4000-8000-000000000001"
ACCEPTED = (202, json.dumps(DEPLOYMENT_ID).encode())
FORBIDDEN = (403, b"")


@dataclass
class FakeKudu:
    """Kudu's One deploy surface on loopback HTTPS: `/api/publish` answers from `publishes`
    (the last one repeats), `/api/deployments/latest` from `statuses` in turn."""

    statuses: list[dict[str, object]]
    publishes: list[tuple[int, bytes]] = field(default_factory=lambda: [ACCEPTED])
    late_statuses: list[dict[str, object]] = field(default_factory=list)
    """Served once `statuses` has run out after answering 404 once."""
    received: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    host: str = ""
    context: ssl.SSLContext | None = None


@pytest.fixture
def kudu(tmp_path: Path) -> Iterator[FakeKudu]:
    fake = FakeKudu(statuses=[])
    tls = make_tls_files(tmp_path)

    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            fake.received.append((self.command, self.path, dict(self.headers), body))
            return body

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self._record()
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self._send(401, b"")
            elif self.path != "/api/publish?RemoteBuild=false":
                self._send(404, b"")
            else:
                answer = fake.publishes.pop(0) if len(fake.publishes) > 1 else fake.publishes[0]
                self._send(*answer)

        def do_GET(self) -> None:
            self._record()
            if self.path != "/api/deployments/latest" or not fake.statuses:
                self._send(404, b"")
                fake.statuses, fake.late_statuses = fake.late_statuses, []
            else:
                self._send(200, json.dumps(fake.statuses.pop(0)).encode())

        def log_message(self, *_: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(tls.cert, tls.key)
    server.socket = server_context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    fake.host = f"127.0.0.1:{server.server_address[1]}"
    fake.context = ssl.create_default_context(cafile=str(tls.ca))
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@dataclass
class Waits:
    """Records each wait instead of sleeping, so backoff is checked without wall time."""

    seconds: list[float] = field(default_factory=list)

    def retry(self) -> Retry:
        return Retry(sleep=self.seconds.append)


def deploy(kudu: FakeKudu, waits: Waits, token: str = TOKEN, timeout: float = 60) -> str:
    return publish(
        kudu.host,
        b"PK-zip-bytes",
        token,
        context=kudu.context,
        poll_seconds=0,
        timeout_seconds=timeout,
        retry=waits.retry(),
    )


def requests_of(kudu: FakeKudu) -> list[tuple[str, str]]:
    return [(method, path) for method, path, _, _ in kudu.received]


def test_an_accepted_zip_is_followed_through_the_latest_deployment(kudu: FakeKudu) -> None:
    """A 202 is polled at /api/deployments/latest (as Microsoft's tooling does) until status 4,
    with the zip sent as application/zip and every call carrying the token."""
    kudu.statuses = [{"id": DEPLOYMENT_ID, "status": 1}, {"id": DEPLOYMENT_ID, "status": 4}]
    assert deploy(kudu, Waits()) == DEPLOYMENT_ID
    post, *polls = kudu.received
    assert post[0:2] == ("POST", "/api/publish?RemoteBuild=false")
    assert post[2]["Content-Type"] == "application/zip"
    assert post[3] == b"PK-zip-bytes"
    assert requests_of(kudu)[1:] == [("GET", "/api/deployments/latest")] * 2
    assert all(headers["Authorization"] == f"Bearer {TOKEN}" for _, _, headers, _ in polls)


def test_a_synchronous_answer_is_the_end_of_the_publish(kudu: FakeKudu) -> None:
    """Flex can answer the publish with 200 once it is done: nothing is polled after it."""
    kudu.publishes = [(200, b"")]
    assert deploy(kudu, Waits()) == "latest"
    assert requests_of(kudu) == [("POST", "/api/publish?RemoteBuild=false")]


def test_a_synchronous_answer_with_a_failed_status_is_an_error(kudu: FakeKudu) -> None:
    """A 200 whose body is a failed deployment status stops the update with Kudu's reason."""
    kudu.publishes = [(200, json.dumps({"status": 3, "status_text": "no host file"}).encode())]
    with pytest.raises(RuntimeError, match="status 3: no host file"):
        deploy(kudu, Waits())


def test_the_previous_deployment_reported_as_latest_is_not_taken_for_this_one(
    kudu: FakeKudu,
) -> None:
    """Until the accepted deployment becomes the latest, the old success is waited out."""
    kudu.statuses = [{"id": PREVIOUS_ID, "status": 4}, {"id": DEPLOYMENT_ID, "status": 4}]
    assert deploy(kudu, Waits()) == DEPLOYMENT_ID
    assert len(requests_of(kudu)) == 3


def test_a_first_deployment_not_yet_recorded_as_latest_is_waited_for(kudu: FakeKudu) -> None:
    """Before an app's first deployment is recorded, `latest` answers 404: that is waited out."""
    kudu.statuses = []
    kudu.late_statuses = [{"id": DEPLOYMENT_ID, "status": 4}]
    assert deploy(kudu, Waits()) == DEPLOYMENT_ID
    assert requests_of(kudu)[1:] == [("GET", "/api/deployments/latest")] * 2


def test_a_refusal_while_the_role_propagates_is_retried_with_growing_waits(
    kudu: FakeKudu,
) -> None:
    """403 twice, then accepted: the publish goes on after waits of 5 s and 10 s."""
    kudu.publishes = [FORBIDDEN, FORBIDDEN, ACCEPTED]
    kudu.statuses = [{"id": DEPLOYMENT_ID, "status": 4}]
    waits = Waits()
    assert deploy(kudu, waits) == DEPLOYMENT_ID
    assert waits.seconds[:2] == [5.0, 10.0]
    assert requests_of(kudu).count(("POST", "/api/publish?RemoteBuild=false")) == 3


def test_a_refusal_that_never_ends_stops_after_bounded_retries_with_a_clear_error(
    kudu: FakeKudu,
) -> None:
    """403 on every attempt: six attempts over 135 s of waits, then an error naming the
    status, the path and the roles to check, never the token."""
    kudu.publishes = [FORBIDDEN]
    waits = Waits()
    with pytest.raises(
        RuntimeError, match=r"POST /api/publish answered 403 Forbidden 6 times"
    ) as error:
        deploy(kudu, waits)
    assert waits.seconds == list(PROPAGATION_DELAYS)
    assert sum(PROPAGATION_DELAYS) == 135
    assert "Website Contributor" in str(error.value)
    assert TOKEN not in str(error.value)


def test_a_failed_deployment_stops_the_update_with_kudus_reason(kudu: FakeKudu) -> None:
    """Status 3 with its status_text fails the publish instead of reporting success."""
    kudu.statuses = [
        {
            "id": DEPLOYMENT_ID,
            "status": 3,
            "status_text": "WEBSITE_RUN_FROM_PACKAGE is not supported",
        }
    ]
    with pytest.raises(RuntimeError, match="status 3: WEBSITE_RUN_FROM_PACKAGE"):
        deploy(kudu, Waits())


def test_a_refused_publish_names_the_status_and_path_but_not_the_token(kudu: FakeKudu) -> None:
    """A 401 that outlasts the retries is reported as such; the bearer token never appears."""
    with pytest.raises(RuntimeError, match="POST /api/publish answered 401") as error:
        deploy(kudu, Waits(), token="other.token.value")
    assert "other.token.value" not in str(error.value)


def test_a_deployment_that_never_finishes_times_out(kudu: FakeKudu) -> None:
    """Polling stops after the timeout with a message instead of waiting forever."""
    kudu.statuses = [{"id": DEPLOYMENT_ID, "status": 2}] * 5
    with pytest.raises(RuntimeError, match="did not finish"):
        deploy(kudu, Waits(), timeout=0)


STORAGE_REFUSED = {
    "id": DEPLOYMENT_ID,
    "status": 3,
    "status_text": "Failed to upload the package to the deployment storage: "
    "AuthorizationPermissionMismatch (403)",
}


def test_a_deployment_the_fresh_storage_role_refused_is_published_again(kudu: FakeKudu) -> None:
    """A first deployment that fails because the deployment storage refused the app's identity
    (its new role on the runtime account not yet in effect) is published again after a wait,
    and the second one succeeds."""
    kudu.publishes = [ACCEPTED, ACCEPTED]
    kudu.statuses = [STORAGE_REFUSED, {"id": DEPLOYMENT_ID, "status": 4}]
    waits = Waits()

    assert deploy(kudu, waits) == DEPLOYMENT_ID
    assert requests_of(kudu).count(("POST", "/api/publish?RemoteBuild=false")) == 2
    assert waits.seconds == [PROPAGATION_DELAYS[0]]


def test_a_storage_refusal_that_never_ends_stops_after_bounded_attempts(kudu: FakeKudu) -> None:
    """The same refusal on every attempt: six publishes over the bounded waits, then an error
    naming the runtime account's role to check."""
    kudu.statuses = [STORAGE_REFUSED] * 6
    waits = Waits()

    with pytest.raises(RuntimeError, match="6 attempts over 135 s") as error:
        deploy(kudu, waits)
    assert waits.seconds == list(PROPAGATION_DELAYS)
    assert "Storage Blob Data Owner role on the runtime account" in str(error.value)
    assert requests_of(kudu).count(("POST", "/api/publish?RemoteBuild=false")) == 6


def test_a_deployment_failed_for_another_reason_is_not_published_again(kudu: FakeKudu) -> None:
    """A failure that is not a storage refusal (a bad package) is reported at once."""
    kudu.statuses = [{"id": DEPLOYMENT_ID, "status": 3, "status_text": "no host.json"}]
    with pytest.raises(RuntimeError, match=r"no host\.json"):
        deploy(kudu, Waits())
    assert requests_of(kudu).count(("POST", "/api/publish?RemoteBuild=false")) == 1


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_an_scm_host_not_serving_yet_is_waited_for(kudu: FakeKudu, status: int) -> None:
    """A new site's SCM host answering throttled or unavailable is retried like a refusal."""
    kudu.publishes = [(status, b""), ACCEPTED]
    kudu.statuses = [{"id": DEPLOYMENT_ID, "status": 4}]
    waits = Waits()

    assert deploy(kudu, waits) == DEPLOYMENT_ID
    assert waits.seconds[0] == PROPAGATION_DELAYS[0]


def test_an_scm_host_that_never_serves_stops_with_its_status(kudu: FakeKudu) -> None:
    """503 on every attempt ends with the status and a reason that is not about roles."""
    kudu.publishes = [(503, b"")]
    with pytest.raises(RuntimeError, match="503 Service Unavailable 6 times") as error:
        deploy(kudu, Waits())
    assert "SCM host is not serving yet" in str(error.value)

"""docs/operations.md's "who deleted a blob" query, read from the page itself and run over
`StorageBlobLogs` rows, names the deletes of that blob and nothing else."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from testkit.kql import run_query

PAGE = Path(__file__).resolve().parents[1] / "docs" / "operations.md"
BLOB = "/stdocsprod/documents/0f8e6b2a4c1d4e7f9a3b5c6d7e8f9012.pdf"
COLUMNS = {
    *("TimeGenerated", "OperationName", "ObjectKey", "Uri", "StatusCode", "StatusText"),
    *("AuthenticationType", "AuthenticationHash", "RequesterObjectId", "RequesterUpn"),
    *("CallerIpAddress", "UserAgentHeader"),
}
"""Columns of the table the rows use, as Microsoft names them:
https://learn.microsoft.com/azure/azure-monitor/reference/tables/storagebloblogs"""


def documented_query() -> str:
    """The one kusto block of the page's "Who deleted a blob" section."""
    section = PAGE.read_text(encoding="utf-8").split("\n## Who deleted a blob\n", 1)[1]
    [query] = re.findall(r"```kusto\n(.*?)\n```", section.split("\n## ", 1)[0], re.DOTALL)
    return str(query)


def log_row(when: str, operation: str, key: str, **fields: Any) -> dict[str, Any]:
    """One `StorageBlobLogs` row: a successful request unless `fields` say otherwise."""
    row = {
        "TimeGenerated": datetime.fromisoformat(when).replace(tzinfo=UTC),
        "OperationName": operation,
        "ObjectKey": key,
        "Uri": f"https://stdocsprod.blob.core.windows.net{key.removeprefix('/stdocsprod')}",
        "StatusCode": "202" if operation.startswith("Delete") else "200",
        "StatusText": "Success",
        **fields,
    }
    assert set(row) <= COLUMNS
    return row


USER = {
    "AuthenticationType": "OAuth",
    "RequesterUpn": "alex@contoso.com",
    "RequesterObjectId": "6a1c2f80-5d3e-4b7a-9c21-0e8f4d2b7a13",
    "CallerIpAddress": "203.0.113.7:53211",
    "UserAgentHeader": "Azure-Storage-Explorer/1.36.2",
}
SAS = {
    "AuthenticationType": "SAS",
    "AuthenticationHash": "SasSignature(04D64C2B3A704145C9F1664F201123467A74D72DA72751A9137DDAA732FA03CF)",
    "CallerIpAddress": "198.51.100.20:40112",
    "UserAgentHeader": "AzCopy/10.27.1",
}


@pytest.fixture
def logs() -> list[dict[str, Any]]:
    """A user's delete of the blob, a delete of it through a SAS after it was restored, a read
    of it, a delete refused for lack of a role, and another blob's delete."""
    return [
        log_row("2026-11-03T09:15:02", "DeleteBlob", BLOB, **USER),
        log_row("2026-11-03T08:00:00", "GetBlob", BLOB, **USER),
        log_row("2026-11-04T22:41:37", "DeleteBlob", BLOB, **SAS),
        log_row(
            "2026-11-04T10:00:00",
            "DeleteBlob",
            BLOB,
            **{**USER, "StatusCode": "403", "StatusText": "AuthorizationPermissionMismatch"},
        ),
        log_row("2026-11-03T09:15:03", "DeleteBlob", "/stdocsprod/documents/other.pdf", **USER),
    ]


def test_the_query_names_who_deleted_the_blob_when_and_from_where(
    logs: list[dict[str, Any]],
) -> None:
    """The page's query returns the blob's two successful deletes, newest first: the SAS one
    with its signature hash and caller, the user's with UPN, object id and caller; the read,
    the refused attempt and the other blob's delete are left out."""
    rows = run_query(documented_query(), {"StorageBlobLogs": logs})

    assert [(row["TimeGenerated"].isoformat(), row["AuthenticationType"]) for row in rows] == [
        ("2026-11-04T22:41:37+00:00", "SAS"),
        ("2026-11-03T09:15:02+00:00", "OAuth"),
    ]
    sas, user = rows
    assert sas["AuthenticationHash"] == SAS["AuthenticationHash"]
    assert (sas["CallerIpAddress"], sas["UserAgentHeader"], sas["RequesterUpn"]) == (
        "198.51.100.20:40112",
        "AzCopy/10.27.1",
        None,
    )
    assert (user["RequesterUpn"], user["RequesterObjectId"], user["CallerIpAddress"]) == (
        "alex@contoso.com",
        USER["RequesterObjectId"],
        "203.0.113.7:53211",
    )
    assert set(user) <= COLUMNS


def test_the_query_finds_the_container_deleted_as_a_whole(logs: list[dict[str, Any]]) -> None:
    """A container deleted as a whole logs one DeleteContainer on the container's key: the
    query returns it beside the blob's own deletes."""
    logs.append(log_row("2026-11-05T07:00:00", "DeleteContainer", "/stdocsprod/documents", **USER))

    rows = run_query(documented_query(), {"StorageBlobLogs": logs})

    assert [row["OperationName"] for row in rows] == ["DeleteContainer", "DeleteBlob", "DeleteBlob"]

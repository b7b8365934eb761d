"""Saved ARM JSON is read as Resource Manager reads it (docs/policies.md, "How files are read").

The differential test derives what to vary from the code: it reads a canonical template with
objects that record every property the offline reader and the ARM adapter look up, then, for
each of those properties, writes the file with the property spelt otherwise (upper, lower,
swapped case) and with the child resources placed wherever ARM accepts them, and requires the
same model and the same verdicts as the canonical file's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from blob_safetynet.policies.adapters import arm
from blob_safetynet.policies.adapters.arm_json import ArmObject
from blob_safetynet.policies.rules import RULES, evaluate
from blob_safetynet.policies.rules.model import Account, Facet, Thresholds
from blob_safetynet.policies.sources import files as offline
from blob_safetynet.policies.sources.files import run_offline_audit
from blob_safetynet.policies.sources.saved import Saved
from blob_safetynet.settings.untrusted import InputFile
from testkit.arm_fake import compliant_account, local_user
from tests.conftest import RunCli
from tests.policies.test_offline_audit import cli_output

NAME = "acctread"
FILE_FACETS_EXCLUDED = {
    *(Facet.ROLES, Facet.DEFENDER),
    *(Facet.LOCKS, Facet.DIAGNOSTICS, Facet.BACKUP),
}
"""Read only from Azure (offline.NOT_IN_FILES), or the nets beside the account, which this
template does not hold (their spellings: tests/policies/test_net_files.py): every other rule
reads the files."""
Path_ = tuple[str | int, ...]


def bodies(insecure: bool) -> dict[str, Any]:
    """The REST bodies of one account; `insecure` turns every switch whose default is the
    compliant value to its other value, so a property misread as absent changes the verdict."""
    account = compliant_account(NAME)
    account.body["properties"]["privateEndpointConnections"] = account.private_endpoint_connections
    users = [local_user(account.id)]
    if insecure:
        props = account.body["properties"]
        props.update(isHnsEnabled=True, isSftpEnabled=True, isLocalUserEnabled=True)
        props.update(publicNetworkAccess="Enabled", minimumTlsVersion="TLS1_0")
        props["encryption"]["keySource"] = "Microsoft.Storage"
        service = account.blob_service_properties["properties"]
        service["deleteRetentionPolicy"]["allowPermanentDelete"] = True
        service["isVersioningEnabled"] = True
        account.containers[0]["properties"]["publicAccess"] = "Blob"
        rule = (account.management_policy or {})["properties"]["policy"]["rules"][0]
        rule["enabled"] = False
        rule["definition"]["actions"]["version"] = {"delete": {"daysAfterCreationGreaterThan": 9}}
    return {
        "account": account.body,
        "blobServices": account.blob_service_properties,
        "managementPolicies": account.management_policy,
        "containers": account.containers,
        "localUsers": users,
    }


def _resource(kind: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    extra = {key: body[key] for key in ("kind", "sku", "location") if key in body}
    return {
        "type": kind,
        "apiVersion": "2026-09-01",
        "name": name,
        **extra,
        **{"properties": copy.deepcopy(body["properties"])},
    }


def template(parts: dict[str, Any], placement: str = "top") -> dict[str, Any]:
    """A template of `parts`: every child at the top (`top`), nested in the account
    (`in-account`), containers nested in a blob service nested in the account
    (`in-service`), or containers nested in a top-level blob service (`service-top`)."""
    full = "Microsoft.Storage/storageAccounts"
    account = _resource(full, NAME, parts["account"])
    service = parts["blobServices"]
    policy = parts["managementPolicies"]
    containers = parts["containers"]
    users = [_resource(f"{full}/localUsers", f"{NAME}/{u['name']}", u) for u in parts["localUsers"]]
    if placement == "top":
        children = [
            _resource(f"{full}/blobServices", f"{NAME}/default", service),
            _resource(f"{full}/managementPolicies", f"{NAME}/default", policy),
            *(
                _resource(f"{full}/blobServices/containers", f"{NAME}/default/{c['name']}", c)
                for c in containers
            ),
        ]
        return {"resources": [account, *children, *users]}
    nested_containers = [_resource("containers", c["name"], c) for c in containers]
    if placement == "service-top":
        top_service = _resource(f"{full}/blobServices", f"{NAME}/default", service)
        top_service["resources"] = nested_containers
        top_policy = _resource(f"{full}/managementPolicies", f"{NAME}/default", policy)
        return {"resources": [account, top_service, top_policy, *users]}
    in_account = [_resource("blobServices", "default", service)]
    if placement == "in-service":
        in_account[0]["resources"] = nested_containers
    else:
        in_account += [
            _resource("blobServices/containers", f"default/{c['name']}", c) for c in containers
        ]
    account["resources"] = [*in_account, _resource("managementPolicies", "default", policy)]
    return {"resources": [account, *users]}


def judge(document: object, tmp_path: Path, name: str = "t.json") -> tuple[Account, Any]:
    """The model and the verdicts (rule id -> outcome, message) of one saved file."""
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    report = run_offline_audit([path], Thresholds())
    [result] = report.results
    verdicts = {f.rule.id: (f.outcome.value, f.message) for f in result.findings}
    return result.account, verdicts


class Recording(ArmObject):
    """An ArmObject that logs, by its place in the document, every key looked up in it."""

    log: ClassVar[list[Path_]] = []

    def __init__(self, pairs: Any, path: Path_ = ()) -> None:
        super().__init__(pairs)
        self.path = path

    def __getitem__(self, key: str) -> Any:
        if key in self:
            Recording.log.append((*self.path, self.spelling(key) or key))
        return super().__getitem__(key)

    def _like(self, pairs: list[tuple[str, Any]]) -> ArmObject:
        return Recording(pairs, self.path)


def recorded(value: Any, path: Path_ = ()) -> Any:
    if isinstance(value, dict):
        return Recording([(k, recorded(v, (*path, k))) for k, v in value.items()], path)
    if isinstance(value, list):
        return [recorded(item, (*path, index)) for index, item in enumerate(value)]
    return value


def paths_read(document: dict[str, Any]) -> set[Path_]:
    """Every property of `document` the offline reader and the adapter look up."""
    Recording.log = []
    saved = Saved(recorded(document), InputFile.of("--from-file", "canonical", b""))
    for piece in offline.group([(saved, "canonical")]):
        evaluate(arm.account(offline.reads_of(piece)), Thresholds(), every_rule=True)
    return set(Recording.log)


def respelt(document: Any, path: Path_, spelling: str) -> Any:
    """`document` with the key at `path` spelt `spelling`."""
    changed = copy.deepcopy(document)
    node = changed
    for step in path[:-1]:
        node = node[step]
    key = path[-1]
    assert isinstance(key, str)
    node[spelling] = node.pop(key)
    return changed


def every_key_swapped(value: Any) -> Any:
    if isinstance(value, dict):
        return {k.swapcase(): every_key_swapped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [every_key_swapped(item) for item in value]
    return value


def variants(key: str) -> Iterator[str]:
    seen = {key}
    for spelling in (key.upper(), key.lower(), key.swapcase(), key[:1].upper() + key[1:]):
        if spelling not in seen:
            seen.add(spelling)
            yield spelling


@pytest.mark.parametrize("insecure", [False, True], ids=["compliant", "insecure"])
def test_every_spelling_and_placement_arm_accepts_gives_the_canonical_verdicts(
    tmp_path: Path, insecure: bool
) -> None:
    """Each property the code reads, spelt in any case and with children placed anywhere ARM
    accepts them, gives the canonical file's model and verdicts, for every rule files feed."""
    parts = bodies(insecure)
    canonical = template(parts)
    model, verdicts = judge(canonical, tmp_path)
    file_rules = {r.id for r in RULES if not r.facets & FILE_FACETS_EXCLUDED}
    judged = {rule for rule, (outcome, _) in verdicts.items() if outcome != "NOT_IN_FILES"}
    assert judged == file_rules
    assert "UNKNOWN" not in {outcome for outcome, _ in verdicts.values()}
    if insecure:
        assert sum(outcome == "FAIL" for outcome, _ in verdicts.values()) >= 8
    read = paths_read(canonical)
    assert len(read) > 60, "the recorder saw the adapter's reads"
    checked = 0
    for path in sorted(read, key=str):
        for spelling in variants(str(path[-1])):
            document = respelt(canonical, path, spelling)
            assert judge(document, tmp_path) == (model, verdicts), (path, spelling)
            checked += 1
    for placement in ("top", "in-account", "in-service", "service-top"):
        placed = template(parts, placement)
        assert judge(placed, tmp_path) == (model, verdicts), placement
        assert judge(every_key_swapped(placed), tmp_path) == (model, verdicts), placement
    assert checked > 150


def one_change(tmp_path: Path, edit: Any) -> dict[str, tuple[str, str]]:
    """The verdicts of the compliant template after `edit(document)`."""
    document = template(bodies(False))
    edit(document)
    return judge(document, tmp_path)[1]


def resource(document: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(r for r in document["resources"] if r["type"].endswith(kind))


def rename(node: dict[str, Any], key: str, spelling: str) -> None:
    node[spelling] = node.pop(key)


def test_a_public_access_key_spelt_PublicAccess_is_read(tmp_path: Path) -> None:
    """`PublicAccess: Blob` on a container fails SN-CONTAINERS-PRIVATE."""

    def edit(document: dict[str, Any]) -> None:
        props = resource(document, "/containers")["properties"]
        props.pop("publicAccess")
        props["PublicAccess"] = "Blob"

    assert one_change(tmp_path, edit)["SN-CONTAINERS-PRIVATE"][0] == "FAIL"


def test_a_properties_key_spelt_Properties_is_read(tmp_path: Path) -> None:
    """A container whose `Properties` says `publicAccess: Container` fails."""

    def edit(document: dict[str, Any]) -> None:
        container = resource(document, "/containers")
        container["properties"]["publicAccess"] = "Container"
        rename(container, "properties", "Properties")

    assert one_change(tmp_path, edit)["SN-CONTAINERS-PRIVATE"][0] == "FAIL"


def test_is_hns_enabled_spelt_IsHnsEnabled_is_read(tmp_path: Path) -> None:
    """`IsHnsEnabled: true` fails SN-FLAT-NAMESPACE."""

    def edit(document: dict[str, Any]) -> None:
        props = resource(document, "storageAccounts")["properties"]
        props.pop("isHnsEnabled")
        props["IsHnsEnabled"] = True

    assert one_change(tmp_path, edit)["SN-FLAT-NAMESPACE"][0] == "FAIL"


def test_a_lifecycle_rule_disabled_as_Enabled_false_is_read(tmp_path: Path) -> None:
    """A lifecycle rule with `Enabled: false` does not count: SN-PENDING-LIFECYCLE fails."""

    def edit(document: dict[str, Any]) -> None:
        rule = resource(document, "managementPolicies")["properties"]["policy"]["rules"][0]
        rule.pop("enabled")
        rule["Enabled"] = False

    assert one_change(tmp_path, edit)["SN-PENDING-LIFECYCLE"][0] == "FAIL"


def test_allow_permanent_delete_spelt_AllowPermanentDelete_is_read(tmp_path: Path) -> None:
    """`AllowPermanentDelete: true` fails SN-NO-PERMANENT-DELETE."""

    def edit(document: dict[str, Any]) -> None:
        policy = resource(document, "blobServices")["properties"]["deleteRetentionPolicy"]
        policy.pop("allowPermanentDelete")
        policy["AllowPermanentDelete"] = True

    assert one_change(tmp_path, edit)["SN-NO-PERMANENT-DELETE"][0] == "FAIL"


def test_publicaccess_none_in_lower_case_is_private(tmp_path: Path) -> None:
    """`publicAccess: "none"` passes like `None`: ARM's enum values ignore case."""

    def edit(document: dict[str, Any]) -> None:
        resource(document, "/containers")["properties"]["publicAccess"] = "none"

    assert one_change(tmp_path, edit)["SN-CONTAINERS-PRIVATE"][0] == "PASS"


def test_one_property_in_two_spellings_is_an_input_error(tmp_path: Path, run_cli: RunCli) -> None:
    """`allowBlobPublicAccess: false` beside `AllowBlobPublicAccess: true` exits 2, naming
    both spellings."""
    document = template(bodies(False))
    resource(document, "storageAccounts")["properties"]["AllowBlobPublicAccess"] = True
    path = tmp_path / "two.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code, _, err = run_cli("audit", "--from-file", str(path))
    assert code == 2
    assert "'allowBlobPublicAccess'" in err
    assert "'AllowBlobPublicAccess'" in err


def test_the_same_key_twice_in_one_object_is_an_input_error(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """A JSON object holding one key twice (same spelling) is refused, not read last-wins."""
    text = json.dumps(template(bodies(False)))
    text = text.replace(
        '"allowBlobPublicAccess": false',
        '"allowBlobPublicAccess": false, "allowBlobPublicAccess": true',
        1,
    )
    path = tmp_path / "twice.json"
    path.write_text(text, encoding="utf-8")
    code, _, err = run_cli("audit", "--from-file", str(path))
    assert (code, "given twice" in err) == (2, True)


def test_a_public_container_nested_in_the_account_is_judged(tmp_path: Path) -> None:
    """A public container in the account's own `resources`, beside a private top-level one,
    fails SN-CONTAINERS-PRIVATE."""

    def edit(document: dict[str, Any]) -> None:
        account = resource(document, "storageAccounts")
        account["resources"] = [
            {
                "type": "blobServices/containers",
                "apiVersion": "2026-09-01",
                "name": "default/nested",
                "properties": {"publicAccess": "Container"},
            }
        ]

    verdict = one_change(tmp_path, edit)["SN-CONTAINERS-PRIVATE"]
    assert verdict[0] == "FAIL"
    assert "nested" in verdict[1]
    assert "default/" not in verdict[1], "named as ARM's GET names a container"


@pytest.mark.parametrize("kind", ["containers", "localUsers", "blobServices", "managementPolicies"])
def test_a_second_document_for_one_resource_is_refused(
    tmp_path: Path, run_cli: RunCli, kind: str
) -> None:
    """Two documents for one resource (a container, a local user, the blob service, the
    policy), even spelt in other cases, exit 2: which one ARM holds cannot be told."""
    document = template(bodies(False))
    first = next(r for r in document["resources"] if r["type"].endswith(f"/{kind}"))
    second = copy.deepcopy(first)
    second["name"] = second["name"].upper().replace(NAME.upper(), NAME)
    if kind == "containers":
        second["properties"] = {"publicAccess": "Blob"}
    document["resources"].append(second)
    path = tmp_path / "second.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code, _, err = run_cli("audit", "--from-file", str(path))
    assert code == 2
    assert "a second" in err


def test_a_fully_qualified_type_inside_a_parent_is_an_input_error(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """A nested child whose type is not relative to its parent's is refused with the rule."""
    document = template(bodies(False), "in-account")
    resource(document, "storageAccounts")["resources"][0]["type"] = (
        "Microsoft.Storage/storageAccounts/blobServices"
    )
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code, _, err = run_cli("audit", "--from-file", str(path))
    assert (code, "relative to the parent" in err) == (2, True)


@pytest.mark.parametrize("insecure", [False, True], ids=["compliant", "insecure"])
def test_cli_outputs_and_rest_bodies_are_read_in_any_case(tmp_path: Path, insecure: bool) -> None:
    """The `az` outputs (flattened) and the REST bodies, every key's case swapped, give the
    verdicts of the same files as written."""
    parts = bodies(insecure)
    rest = [
        parts["account"],
        parts["blobServices"],
        parts["managementPolicies"],
        parts["containers"],
    ]
    cli = [cli_output(parts["account"]), cli_output(parts["blobServices"]),
           cli_output(parts["managementPolicies"]), [cli_output(c) for c in parts["containers"]]]  # fmt: skip
    for shape, documents in (("rest", rest), ("cli", cli)):
        canonical = verdicts_of(documents, tmp_path / f"{shape}-as-written")
        swapped = verdicts_of(
            [every_key_swapped(d) for d in documents], tmp_path / f"{shape}-swapped"
        )
        assert swapped == canonical, shape
        assert any(outcome == "FAIL" for outcome, _ in canonical.values()) is insecure


def verdicts_of(documents: list[Any], folder: Path) -> dict[str, tuple[str, str]]:
    folder.mkdir()
    paths = []
    for number, document in enumerate(documents):
        paths.append(folder / f"{number}.json")
        paths[-1].write_text(json.dumps(document), encoding="utf-8")
    report = run_offline_audit(paths, Thresholds(), "2026-09-01")
    return {f.rule.id: (f.outcome.value, f.message) for f in report.findings}


NON_ASCII_SPELLINGS = [
    ("allowBlobPublicAccess", "allowBlobPublicAcce\u00df", False, "SN-NO-PUBLIC-ACCESS"),
    ("allowSharedKeyAccess", "allowShared\u212aeyAccess", False, "SN-SHARED-KEY-OFF"),
    ("minimumTlsVersion", "minimumTl\u017fVersion", "TLS1_2", "SN-HTTPS-TLS"),
]
"""A property spelt with a letter whose Unicode case folding is ASCII (ß to ss, the Kelvin
sign to k, the long s to s): ARM's ordinal ignore-case never matches those to ASCII, so the
property is not the one its ASCII spelling names."""


@pytest.mark.parametrize(("key", "spelling", "value", "rule"), NON_ASCII_SPELLINGS)
def test_a_property_spelt_with_a_non_ascii_fold_is_not_that_property(
    tmp_path: Path, key: str, spelling: str, value: object, rule: str
) -> None:
    """The secure value under a name ARM does not take for the property leaves the property
    absent, and its permissive default fails the rule."""

    def edit(document: dict[str, Any]) -> None:
        props = resource(document, "storageAccounts")["properties"]
        props.pop(key, None)
        props[spelling] = value

    assert one_change(tmp_path, edit)[rule][0] == "FAIL"


@pytest.mark.parametrize("value", ["TL\u017f1_2", "TL\u017f1_3", "tl\u017f1_2"])
def test_an_enum_value_with_a_non_ascii_letter_is_not_that_value(
    tmp_path: Path, value: str
) -> None:
    """`minimumTlsVersion: TLS1_2` spelt with a long s (U+017F) is no TLS version ARM knows:
    SN-HTTPS-TLS fails."""

    def edit(document: dict[str, Any]) -> None:
        resource(document, "storageAccounts")["properties"]["minimumTlsVersion"] = value

    assert one_change(tmp_path, edit)["SN-HTTPS-TLS"][0] == "FAIL"


@pytest.mark.parametrize(
    ("path", "value", "rule"),
    [
        (("networkAcls", "bypass"), "AzureServices", "SN-TRUSTED-SERVICES"),
        (("publicNetworkAccess",), "Disabled", "SN-PUBLIC-NETWORK-ACCESS"),
        (("encryption", "keySource"), "Microsoft.Keyvault", "SN-CMK-ENCRYPTION"),
    ],
)
def test_enum_values_fold_ascii_letters_only(
    tmp_path: Path, path: tuple[str, ...], value: str, rule: str
) -> None:
    """An enum value spelt in other ASCII case passes; the same with one letter replaced by
    its non-ASCII case twin (K to the Kelvin sign, s to the long s, i to the dotless i) fails."""
    twins = {"k": "\u212a", "s": "\u017f", "i": "\u0131"}
    letter = next(c for c in twins if c in value.lower())
    spellings = {value.swapcase(): "PASS", value.lower().replace(letter, twins[letter], 1): "FAIL"}
    for spelling, outcome in spellings.items():

        def edit(document: dict[str, Any], spelling: str = spelling) -> None:
            node = resource(document, "storageAccounts")["properties"]
            for step in path[:-1]:
                node = node[step]
            node[path[-1]] = spelling

        assert one_change(tmp_path, edit)[rule][0] == outcome, spelling


def test_arm_objects_fold_ascii_letters_only() -> None:
    """`ArmObject` finds a key in any ASCII case and never through a non-ASCII letter."""
    body = ArmObject([("allowBlobPublicAcce\u00df", False), ("IsHnsEnabled", True)])
    assert "ishnsenabled" in body
    assert body["ISHNSENABLED"] is True
    assert "allowBlobPublicAccess" not in body
    assert "allowblobpublicacce\u00df" in body, "ASCII letters of a non-ASCII name still fold"
    assert ArmObject([("\u212aind", "x")]).get("kind") is None

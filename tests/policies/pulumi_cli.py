"""What the Pulumi CLI does with a Python policy pack, without the CLI (it cannot be installed here).

- Start: for a `runtime: python` pack the CLI runs the `pulumi-analyzer-policy-python` shim in
  the pack's folder with the engine address and `.` as arguments; the shim runs
  `<virtualenv>/bin/python -u -m pulumi.policy <engine> .` (pulumi/pulumi
  `sdk/python/dist/pulumi-analyzer-policy-python`, `NewPolicyAnalyzer` in
  `sdk/go/common/resource/plugin/analyzer_plugin.go`), which runs `__main__.py` of the folder.
  The pack prints its gRPC port on stdout and serves the Analyzer service.
- Config: the CLI parses the `--policy-pack-config` file (`parsePolicyPackConfig`), builds every
  policy's config from its schema defaults, applies `"all"` (its `enforcementLevel` only) and
  then each policy's own entry (`ReconcilePolicyPackConfig` / `applyConfig`), validates each
  policy's properties against its schema, and sends the result with `Configure`
  (pulumi/pulumi `pkg/resource/analyzer/config.go`). `reconcile` below follows that code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import jsonschema
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from tests import tree

LEVELS = ("advisory", "mandatory", "remediate", "disabled")
PROTO_LEVEL = {
    "advisory": analyzer_pb2.ADVISORY,
    "mandatory": analyzer_pb2.MANDATORY,
    "remediate": analyzer_pb2.REMEDIATE,
    "disabled": analyzer_pb2.DISABLED,
}
LEVEL_NAME = {value: key for key, value in PROTO_LEVEL.items()}


@dataclass
class PolicyConfig:
    enforcement_level: str | None
    properties: dict[str, Any] | None


def parse_config_file(text: str) -> dict[str, PolicyConfig]:
    """`parsePolicyPackConfig`: a string is an enforcement level; an object may carry one."""
    result: dict[str, PolicyConfig] = {}
    for key, value in json.loads(text).items():
        if isinstance(value, str):
            if value not in LEVELS:
                raise ValueError(f"parsing enforcement level for {key!r}: {value!r}")
            level, properties = value, None
        elif isinstance(value, dict):
            props = dict(value)
            level = props.pop("enforcementLevel", None)
            if level is not None and level not in LEVELS:
                raise ValueError(f"parsing enforcement level for {key!r}: {level!r}")
            properties = props or None
        else:
            raise ValueError(f"parsing {key!r}: must be a string or object")
        if level is None and not properties:
            continue
        result[key] = PolicyConfig(level, properties)
    return result


def reconcile(
    info: analyzer_pb2.AnalyzerInfo, config: Mapping[str, PolicyConfig]
) -> dict[str, PolicyConfig]:
    """`ReconcilePolicyPackConfig`: schema defaults, then `"all"`, then each policy's entry."""
    result: dict[str, PolicyConfig] = {}
    schemas: dict[str, dict[str, Any]] = {}
    for policy in info.policies:
        schema = json_format.MessageToDict(policy.configSchema)
        schemas[policy.name] = schema
        defaults = {
            key: spec["default"]
            for key, spec in schema.get("properties", {}).items()
            if "default" in spec
        }
        result[policy.name] = PolicyConfig(LEVEL_NAME[policy.enforcementLevel], defaults or None)
    everything = config.get("all")
    if everything is not None and everything.enforcement_level is not None:
        for name, entry in result.items():
            result[name] = PolicyConfig(everything.enforcement_level, entry.properties)
    for name, given in config.items():
        current = result.get(name, PolicyConfig(None, None))
        properties = dict(current.properties or {})
        properties.update(given.properties or {})
        result[name] = PolicyConfig(
            given.enforcement_level or current.enforcement_level, properties or None
        )
    for name, schema in schemas.items():
        document = {"type": "object", **schema}
        jsonschema.validate(result[name].properties or {}, document)
    return result


def configure_request(config: Mapping[str, PolicyConfig]) -> analyzer_pb2.ConfigureAnalyzerRequest:
    request = analyzer_pb2.ConfigureAnalyzerRequest()
    for name, entry in config.items():
        message = request.policyConfig[name]
        if entry.enforcement_level is not None:
            message.enforcementLevel = PROTO_LEVEL[entry.enforcement_level]
        if entry.properties:
            message.properties.update(entry.properties)
    return request


@dataclass(frozen=True)
class StackResource:
    """One resource as the engine sends it to AnalyzeStack: its outputs, URN and parent URN."""

    urn: str
    type: str
    name: str
    properties: Mapping[str, Any]
    parent: str = ""

    def message(self) -> analyzer_pb2.AnalyzerResource:
        props = struct_pb2.Struct()
        props.update(dict(self.properties))
        return analyzer_pb2.AnalyzerResource(
            urn=self.urn,
            type=self.type,
            name=self.name,
            properties=props,
            options=analyzer_pb2.AnalyzerResourceOptions(parent=self.parent),
            parent=self.parent,
        )


@dataclass
class RunningPack:
    process: subprocess.Popen[bytes]
    stub: analyzer_pb2_grpc.AnalyzerStub

    def info(self) -> analyzer_pb2.AnalyzerInfo:
        return self.stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)

    def configure(self, config_file: str = "{}") -> None:
        """The CLI's `--policy-pack-config` handling, then `Configure`."""
        config = reconcile(self.info(), parse_config_file(config_file))
        self.stub.Configure(configure_request(config), timeout=30)

    def analyze_stack(self, resources: list[StackResource]) -> list[analyzer_pb2.AnalyzeDiagnostic]:
        request = analyzer_pb2.AnalyzeStackRequest(resources=[r.message() for r in resources])
        return list(self.stub.AnalyzeStack(request, timeout=60).diagnostics)


@contextmanager
def start_pack(
    folder: Path, python: Path | None = None, env: Mapping[str, str] | None = None
) -> Iterator[RunningPack]:
    """The pack in a fresh process, started as the CLI's Python shim starts it: on the tree
    under test, or with `python`, the pack's own venv's interpreter and what it installed."""
    engine = "127.0.0.1:1"  # the pack never calls back here for stack policies
    base = dict(os.environ if env is None else env)
    process = subprocess.Popen(
        [str(python or sys.executable), "-u", "-m", "pulumi.policy", engine, "."],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=base if python is not None else tree.environment(base),
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode().strip()
        if not line.isdigit():
            process.kill()
            _, err = process.communicate(timeout=10)
            raise RuntimeError(f"the pack did not print a port: {line!r} {err.decode()[-2000:]}")
        channel = grpc.insecure_channel(f"127.0.0.1:{line}")
        grpc.channel_ready_future(channel).result(timeout=30)
        try:
            yield RunningPack(process, analyzer_pb2_grpc.AnalyzerStub(channel))
        finally:
            channel.close()
    finally:
        process.kill()
        process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

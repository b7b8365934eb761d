"""The folders keep the layers of the design: imports only go down, rules import no SDK."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "blob_safetynet"
PARTS = ("blob_safetynet.infra", "blob_safetynet.policies", "blob_safetynet.reconcile")
"""The runtime parts at the top of the run time: none of them imports another."""
BLOB_SIDE = (
    "blob_safetynet.sweeper",
    "blob_safetynet.protocol",
    "blob_safetynet.store",
    "blob_safetynet.settings",
)
"""Below the parts, one package a layer, as their imports were measured: the sweeper (sweep,
lease, heartbeat, binding) uses the protocol, the protocol the documents store, the store the
settings."""
BOTTOM = (
    "blob_safetynet.settings.vocabulary",
    "blob_safetynet.settings.redaction",
    "blob_safetynet.settings.appsettings",
    "blob_safetynet.settings.atomicfile",
    "blob_safetynet.settings.endpoints",
    "blob_safetynet.settings.untrusted",
    "blob_safetynet.settings.signals",
)
"""The protocol's names, the one redaction path (the Function, the audit and the CLI hide
secrets the same way), the one endpoint parser (a token goes where the rule looked), the
settings' vocabulary (the names the infra program writes are the names the Function reads), the
one way a file is written (checked, never onto an input, atomic) and the one reader of outside
JSON and times (size, depth, UTC offset): standard library only, importable by all. The rest of
the settings package (`parsed`) reads database URLs with SQLAlchemy."""
STANDALONE = ("blob_safetynet.infra", "blob_safetynet.policies")
"""Parts that take only the standard-library bottom of the blob side: the infra program and
the audit never load the store, the protocol or the sweeper."""
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cli", ("blob_safetynet.cli",)),
    ("testkit", ("testkit",)),
    ("embedded", ("blob_safetynet.embedded",)),
    ("function", ("blob_safetynet.function",)),
    ("recover", ("blob_safetynet.recover",)),
    ("runtime", PARTS),
    *((prefix.rsplit(".", 1)[1], (prefix,)) for prefix in BLOB_SIDE),
)
"""Top to bottom. A module may import its own layer (within its own package) or a lower one.
`recover` sits just above the parts: it applies plans the way `reconcile` does (its refusal,
its binding check) and the verifier's drill (function) runs it."""
OUTSIDE = ("tests", "benchmarks", "function_app")
"""Project code that sits above every layer: no layer may import it."""
TOP_FOLDERS = ("sweeper", "policies", "infra")
"""The repository's user-facing folders (the Function's zip root, the CrossGuard pack, the
Pulumi program): each is importable from the checkout as a top-level namespace package, and no
layer may import one."""
GENERATED = ("node_modules", ".venv", "mutants", "build")
"""Folders of installed or generated copies, not project sources."""
SDKS = ("azure", "pulumi", "pulumi_azure_native", "pulumi_policy", "sqlalchemy")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


DYNAMIC_IMPORTERS = ("import_module", "__import__", "spec_from_file_location")
"""Calls that import by a string: the graph sees them only when the string is a literal."""


def dynamic_import(node: ast.AST) -> str | ast.expr | None:
    """The module a call like `importlib.import_module("x.y")` imports: its name when the
    argument is a string literal, the argument's expression when it is not, None for any other
    node (and for a call without arguments)."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if called not in DYNAMIC_IMPORTERS:
        return None
    argument = node.args[0]
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return argument.value
    return argument


def imported_modules(path: Path) -> set[str]:
    """Dotted names of the modules one file imports; `from a import b` counts as `a.b` when b is
    a module, so `from sweeper import vocabulary` is an import of the bottom, not of sweeper."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    return imported_modules_of(path, package)


def imported_modules_of(path: Path, package: list[str]) -> set[str]:
    """The modules `path` imports, relative imports resolved against `package`."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (name := dynamic_import(node)) is not None:
            if isinstance(name, str):
                modules.add(name)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                modules.add(submodule if is_module(submodule) else module)
    return modules


ROOT_NAMES = {"cli": "safetynet", "embedded": "testkit"}
"""Inside the one import package, each part counts as its own root: the CLI as `safetynet`, the
embedded run-time kit as `testkit` (the layer it shares with the test doubles)."""


def root_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] == PACKAGE and len(parts) > 1:
        return ROOT_NAMES.get(parts[1], parts[1])
    return parts[0]


def imported_roots(path: Path) -> set[str]:
    return {root_of(module) for module in imported_modules(path)}


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def place(module: str) -> tuple[int, str] | None:
    """(layer index, package) of a project module; the most specific prefix wins, so
    blob_safetynet.sweeper.sweep is in the sweeper's layer and testkit.kql in the test kit's."""
    matches = [
        (len(prefix), index, prefix)
        for index, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if within(module, prefix)
    ]
    if not matches:
        return None
    _, index, prefix = max(matches)
    return index, prefix


def layer_files() -> Iterator[tuple[Path, str]]:
    """Every .py file of every layer, with its module name."""
    seen: set[Path] = set()
    for _, prefixes in LAYERS:
        for prefix in prefixes:
            base = ROOT.joinpath(*prefix.split("."))
            paths = [base.with_suffix(".py")] if base.with_suffix(".py").is_file() else []
            paths += sorted(base.rglob("*.py")) if base.is_dir() else []
            for path in paths:
                if path not in seen:
                    seen.add(path)
                    yield path, module_name(path)


def layer_violations(module: str, imported: str) -> str | None:
    """Why `module` may not import `imported`, or None when the edge goes down or sideways
    inside one package."""
    if any(within(imported, outside) for outside in OUTSIDE):
        return "imports code that sits above every layer"
    if imported.split(".")[0] in TOP_FOLDERS:
        return "imports a top-level folder (the Function, the pack or the program)"
    here, there = place(module), place(imported)
    if here is None or there is None:
        return None  # a third-party or standard-library module: the SDK rules judge those
    (layer, package), (other_layer, other_package) = here, there
    if package in STANDALONE and other_package in BLOB_SIDE and imported not in BOTTOM:
        return f"imports {other_package} beyond the standard-library bottom"
    if other_layer < layer:
        return f"imports upward, from {LAYERS[layer][0]} into {LAYERS[other_layer][0]}"
    if other_layer == layer and package != other_package:
        return f"imports {other_package}, another package of the {LAYERS[layer][0]} layer"
    return None


def project_imports(path: Path) -> set[str]:
    roots = {prefix.split(".")[0] for _, prefixes in LAYERS for prefix in prefixes}
    return {
        m for m in imported_modules(path) if m.split(".")[0] in {*roots, *OUTSIDE, *TOP_FOLDERS}
    }


def test_every_import_goes_down_the_layers() -> None:
    """Each layer imports its own package or a lower layer: CLI, testkit, the parts, the bottom."""
    offenders = [
        f"{path.relative_to(ROOT)}: {imported} ({reason})"
        for path, module in layer_files()
        for imported in sorted(project_imports(path))
        if (reason := layer_violations(module, imported)) is not None
    ]
    assert offenders == []


def project_files() -> Iterator[Path]:
    """Every .py file of the repository that is not installed or generated."""
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        if parts[0] not in GENERATED and not any("venv" in part for part in parts):
            yield path


def test_dynamic_imports_are_string_literals_the_graph_can_see() -> None:
    """A layer file or the function entry that imports by a computed name would hide an edge
    from the graph, so every `import_module`/`__import__` there names a literal module."""
    paths = [*(path for path, _ in layer_files()), ROOT / "sweeper" / "function_app.py"]
    offenders = [
        f"{path.relative_to(ROOT)}:{argument.lineno}"
        for path in paths
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(argument := dynamic_import(node), ast.expr)
    ]
    assert offenders == []


def test_the_graph_sees_imports_in_function_bodies_and_by_string(tmp_path: Path) -> None:
    """An import inside a function, under TYPE_CHECKING or through importlib by a literal name
    is an edge of the graph like a top-level import."""
    source = tmp_path / "probe.py"
    source.write_text(
        "import importlib\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import blob_safetynet.policies.sources.live\n"
        "def later() -> None:\n"
        "    from blob_safetynet.embedded import crash\n"
        "    importlib.import_module('blob_safetynet.cli.main')\n"
        "    __import__('blob_safetynet.infra.config')\n",
        encoding="utf-8",
    )
    assert {
        "blob_safetynet.policies.sources.live",
        "blob_safetynet.embedded.crash",
        "blob_safetynet.cli.main",
        "blob_safetynet.infra.config",
    } <= (imported_modules_of(source, package=["blob_safetynet", "sweeper"]))


def test_the_check_refuses_an_upward_or_sideways_import() -> None:
    """The rule itself fails an edge that goes up or across the parts, and passes one going down."""
    assert (
        layer_violations("blob_safetynet.sweeper.sweep", "blob_safetynet.embedded.crash")
        is not None
    )
    assert (
        layer_violations("blob_safetynet.settings.vocabulary", "blob_safetynet.sweeper.sweep")
        is not None
    )
    assert (
        layer_violations("blob_safetynet.policies.sources.live", "blob_safetynet.cli.main")
        is not None
    )
    assert (
        layer_violations("blob_safetynet.infra.storage", "blob_safetynet.store.documents")
        is not None
    )
    assert layer_violations("blob_safetynet.embedded.crash", "tests.conftest") is not None
    assert layer_violations("blob_safetynet.embedded.crash", "sweeper.function_app") is not None
    assert layer_violations("blob_safetynet.cli.demo", "blob_safetynet.embedded.crash") is None
    assert (
        layer_violations(
            "blob_safetynet.policies.sources.live", "blob_safetynet.settings.redaction"
        )
        is None
    )
    assert (
        layer_violations("blob_safetynet.sweeper.sweep", "blob_safetynet.store.documents") is None
    )
    assert (
        layer_violations(
            "blob_safetynet.settings.appsettings", "blob_safetynet.settings.vocabulary"
        )
        is None
    )


@pytest.mark.parametrize(
    ("module", "imported", "allowed"),
    [
        ("blob_safetynet.reconcile.listing", "blob_safetynet.sweeper.lease", True),
        ("blob_safetynet.sweeper.sweep", "blob_safetynet.reconcile.listing", False),
        ("blob_safetynet.protocol.upload", "blob_safetynet.store.documents", True),
        ("blob_safetynet.store.documents", "blob_safetynet.protocol.blobs", False),
        ("blob_safetynet.protocol.blobs", "blob_safetynet.sweeper.binding", False),
        ("blob_safetynet.settings.parsed", "blob_safetynet.store.engine", False),
        ("blob_safetynet.function.verify", "blob_safetynet.policies.sources.live", True),
        ("blob_safetynet.function.sweep", "blob_safetynet.sweeper.sweep", True),
        ("blob_safetynet.sweeper.sweep", "blob_safetynet.function.sweep", False),
        ("blob_safetynet.policies.sources.live", "blob_safetynet.settings.parsed", False),
        ("blob_safetynet.policies.sources.live", "blob_safetynet.protocol.blobs", False),
        ("blob_safetynet.reconcile.adopt", "blob_safetynet.policies.sources.live", False),
        ("blob_safetynet.recover.apply", "blob_safetynet.reconcile.listing", True),
        ("blob_safetynet.reconcile.listing", "blob_safetynet.recover.apply", False),
        ("blob_safetynet.function.verify", "blob_safetynet.recover.apply", True),
    ],
)
def test_the_blob_side_layers_go_reconcile_sweeper_protocol_store_settings(
    module: str, imported: str, *, allowed: bool
) -> None:
    """Down the blob side an import is allowed, up it is refused; infra and policies take only
    the standard-library bottom of the settings; reconcile and policies are siblings."""
    assert (layer_violations(module, imported) is None) is allowed


@pytest.mark.parametrize(
    "package",
    [
        *PARTS,
        *BLOB_SIDE,
        "blob_safetynet.recover",
        "blob_safetynet.function",
        "testkit",
        "blob_safetynet.embedded",
    ],
)
def test_runtime_parts_and_testkit_never_import_the_cli_tests_or_benchmarks(package: str) -> None:
    """Nothing the function or the demo runs can depend on the CLI, the tests or the benchmarks."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & {"safetynet", *OUTSIDE})
        for path in ROOT.joinpath(*package.split(".")).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_the_tests_import_the_cli() -> None:
    """safetynet is the top: outside tests/ and blob_safetynet/cli/ itself, no code imports it."""
    paths = [
        path
        for path in ROOT.rglob("*.py")
        if path.relative_to(ROOT).parts[0] not in {"tests", *GENERATED}
        and path.relative_to(ROOT).parts[:2] != (PACKAGE, "cli")
        and "venv" not in path.relative_to(ROOT).parts
    ]
    offenders = [str(p.relative_to(ROOT)) for p in paths if "safetynet" in imported_roots(p)]
    assert offenders == []


def test_the_function_entry_imports_only_the_function_package() -> None:
    """sweeper/function_app.py, the zip root, binds timers to blob_safetynet.function (and reads
    the settings' names); the work, sweeper and policies alike, lives in the package."""
    roots = imported_roots(ROOT / "sweeper" / "function_app.py")
    assert "function" in roots
    assert roots & {"safetynet", "testkit", "tests", "benchmarks", "infra"} == set()
    assert roots & {"sweeper", "policies", "protocol", "store", "reconcile"} == set()


@pytest.mark.parametrize("module", BOTTOM)
def test_bottom_modules_import_only_the_standard_library(module: str) -> None:
    """The bottom stays SDK-free, so importing it never drags a part's dependencies in."""
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    offenders = sorted(
        imported
        for imported in imported_modules(path)
        if imported not in BOTTOM
        and imported.split(".")[0] not in sys.stdlib_module_names
        and imported != "__future__"
    )
    assert offenders == []


def test_rules_and_model_import_no_sdk() -> None:
    """Rules are pure functions over the normalized model: no Azure, Pulumi or database SDK."""
    paths = list((ROOT / PACKAGE / "policies" / "rules").rglob("*.py"))
    offenders = {str(p.relative_to(ROOT)): sorted(imported_roots(p) & set(SDKS)) for p in paths}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_probes_may_use_the_blob_sdk_but_no_other_part() -> None:
    """blob_safetynet/policies/probes act with the Azure SDK (that is their job) and import no other part, no
    Pulumi and no database."""
    paths = list((ROOT / PACKAGE / "policies" / "probes").rglob("*.py"))
    roots = set().union(*(imported_roots(p) for p in paths))
    assert "azure" in roots
    assert roots & (set(SDKS) - {"azure"}) == set()
    assert roots & {"infra", "testkit"} == set()
    assert not [
        module
        for path in paths
        for module in imported_modules(path)
        if any(within(module, package) for package in BLOB_SIDE) and module not in BOTTOM
    ]


def test_rules_import_nothing_of_policies_but_the_rules() -> None:
    """The SDK-free rules (and the model, roles and suppressions beside them) import no other
    room of `policies/`, so neither the SDK nor a report can leak in through them."""
    paths = list((ROOT / PACKAGE / "policies" / "rules").rglob("*.py"))
    offenders = [
        f"{p.relative_to(ROOT)}: {module}"
        for p in paths
        for module in imported_modules(p)
        if within(module, "blob_safetynet.policies")
        and not within(module, "blob_safetynet.policies.rules")
    ]
    assert offenders == []


LONG_MODULE = 500
"""Lines a person can hold in their head; a longer module says why at its top."""


def test_a_module_over_500_lines_says_why_at_its_top() -> None:
    """A project module longer than about 500 lines names the reason in its docstring ("Over
    500 lines" or "Just over 500 lines"), so length is a decision, not drift."""
    offenders = [
        str(path.relative_to(ROOT))
        for path, _ in layer_files()
        if len(path.read_text(encoding="utf-8").splitlines()) > LONG_MODULE
        and "500 lines"
        not in (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "")
    ]
    assert offenders == []


POLICY_ROOMS: Final = {
    "rules": (),
    "adapters": ("rules",),
    "sources": ("adapters", "rules"),
    "pack": ("adapters", "rules"),
    "governance": ("rules",),
    "probes": ("rules",),
    "continuous": ("probes", "rules"),
    "reports": ("sources", "pack", "probes", "rules"),
}
"""The rooms of `blob_safetynet/policies/`, each a concept, and the rooms each may import: the
rules at the bottom (model, RBAC facts, suppressions and the rules), adapters building the model,
sources reading facts through the adapters, the pack, the Azure Policy export, the probes and the
continuous run beside them, and the reports on top."""


def test_policies_is_made_of_its_named_rooms() -> None:
    """`policies/` holds its rooms and nothing else at its top level, so a newcomer finds a
    concept (where SARIF is written, where the fleet is throttled) from the tree alone."""
    top = ROOT / PACKAGE / "policies"
    entries = {p.name for p in top.iterdir() if p.name != "__pycache__"}
    assert entries == {"__init__.py", *POLICY_ROOMS}


def test_policies_rooms_import_only_the_rooms_below_them() -> None:
    """Inside `policies/`, each room imports itself and the rooms POLICY_ROOMS allows it."""
    offenders = []
    for room, allowed in POLICY_ROOMS.items():
        for path in (ROOT / PACKAGE / "policies" / room).rglob("*.py"):
            for module in imported_modules(path):
                if not within(module, "blob_safetynet.policies"):
                    continue
                other = module.split(".")[2] if module.count(".") >= 2 else ""
                if other != room and other not in allowed:
                    offenders.append(f"{path.relative_to(ROOT)}: {module}")
    assert offenders == []

"""`safetynet policy export`: the rule set as Azure Policy definitions and one initiative;
`safetynet policy pack`: the CrossGuard pack as a folder for `pulumi preview --policy-pack`, bound
to the Python environment the command runs in (`policies/pack/folder.py`).

Exit 0 written, 2 bad usage (an unknown format, a folder that cannot hold the files, a scope
that cannot hold definitions, a pack without pulumi-policy installed) or a write that failed
(the message names the file; every file is written whole or not at all, so running again writes
the rest).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from importlib import metadata
from pathlib import Path

from blob_safetynet.cli.commands.common import fail
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.policies.governance import export
from blob_safetynet.settings import atomicfile
from blob_safetynet.settings.redaction import printable

FORMATS = ("azure-policy",)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "policy",
        help="export the rules as Azure Policy definitions and an initiative, or write the "
        "CrossGuard pack",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    exporting = actions.add_parser(
        "export",
        help="write each expressible rule's policy definition, the initiative and the list of "
        "rules Azure Policy cannot express into DIR",
    )
    exporting.add_argument("--format", choices=FORMATS, required=True, help="azure-policy")
    exporting.add_argument(
        "--scope",
        required=True,
        help="where the definitions will be created, which the initiative's definition ids "
        "name: /subscriptions/<id> or /providers/Microsoft.Management/managementGroups/<id>",
    )
    exporting.add_argument(
        "directory", metavar="DIR", help="folder to write (created if its parent exists)"
    )
    exporting.set_defaults(handler=run)
    packing = actions.add_parser(
        "pack",
        help="write the CrossGuard policy pack into DIR for pulumi preview --policy-pack DIR, "
        "run by this Python environment (needs the infra extra)",
    )
    packing.add_argument(
        "directory", metavar="DIR", help="folder to write (created if its parent exists)"
    )
    packing.set_defaults(handler=run_pack)


def _folder_problem(text: str) -> str | None:
    """Why the folder `text` names cannot take the export; None when it can (it may not exist
    yet)."""
    folder = Path(text)
    if not text.strip() or "\x00" in text:
        return f"{atomicfile.shown(text)!r} names no folder"
    try:
        if folder.exists():
            if not folder.is_dir():
                return f"{atomicfile.shown(folder)} is not a folder"
            if not os.access(folder, os.W_OK | os.X_OK):
                return f"folder {atomicfile.shown(folder)} is not writable"
            return None
        parent = folder.parent
        if not parent.is_dir():
            return f"folder {atomicfile.shown(parent)} does not exist"
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"folder {atomicfile.shown(parent)} is not writable"
    except (OSError, ValueError) as error:
        return f"{atomicfile.shown(folder)}: {getattr(error, 'strerror', None) or error}"
    return None


def _write(command: str, folder: Path, files: dict[str, str]) -> int | None:
    """Every file written into `folder` (made if need be); the exit code when one cannot be."""
    try:
        atomicfile.make_folders(folder)
    except OSError as error:
        message = f"DIR {atomicfile.shown(folder)}: cannot write into it: {error.strerror or error}"
        return fail(command, ExitCode.USAGE, message, False)
    written = 0
    try:
        for relative, text in files.items():
            atomicfile.write_text(folder / relative, text, base=folder)
            written += 1
    except (OSError, atomicfile.OutputPathError) as error:
        message = (
            f"could not write into {atomicfile.shown(folder)}: {error}; {written} of "
            f"{len(files)} files were written whole (none in part): once the cause is fixed, "
            "running again writes them all"
        )
        return fail(command, ExitCode.USAGE, message, False)
    return None


def run_pack(args: argparse.Namespace) -> int:
    """The pack's folder, its PulumiPolicy.yaml naming this environment (when it is a virtual
    environment; otherwise Pulumi's default, the python3 on its PATH)."""
    problem = _folder_problem(args.directory)
    if problem:
        return fail("policy pack", ExitCode.USAGE, f"DIR {problem}", False)
    if importlib.util.find_spec("pulumi_policy") is None:
        message = (
            "the pack needs pulumi-policy, which this environment lacks: install "
            "blob-safetynet with the infra extra (blob-safetynet[infra])"
        )
        return fail("policy pack", ExitCode.USAGE, message, False)
    from blob_safetynet import package_version
    from blob_safetynet.policies.pack import folder as pack_folder

    in_venv = sys.prefix != sys.base_prefix
    files = pack_folder.files(
        package_version(),
        metadata.version("pulumi-policy"),
        os.path.abspath(sys.prefix) if in_venv else None,
    )
    folder = Path(args.directory)
    failed = _write("policy pack", folder, files)
    if failed is not None:
        return failed
    runs = (
        f"the virtual environment {printable(os.path.abspath(sys.prefix))}"
        if in_venv
        else "the python3 on Pulumi's PATH, which must have blob-safetynet[infra]"
    )
    print(
        f"wrote the CrossGuard pack to {printable(str(folder))}: pulumi preview --policy-pack "
        f"{printable(str(folder))} runs it with {runs}",
        file=sys.stdout,
    )
    return ExitCode.OK


def run(args: argparse.Namespace) -> int:
    scope = str(args.scope)
    problem = export.scope_problem(scope)
    if problem:
        return fail("policy export", ExitCode.USAGE, f"--scope {scope!r}: {problem}", False)
    problem = _folder_problem(args.directory)
    if problem:
        return fail("policy export", ExitCode.USAGE, f"DIR {problem}", False)
    folder = Path(args.directory)
    try:
        atomicfile.make_folders(folder)
        atomicfile.make_folders(folder / "definitions", base=folder)
    except OSError as error:
        message = f"DIR {atomicfile.shown(folder)}: cannot write into it: {error.strerror or error}"
        return fail("policy export", ExitCode.USAGE, message, False)
    files = export.documents(scope)
    texts = {
        relative: json.dumps(document, indent=2, ensure_ascii=True) + "\n"
        for relative, document in files.items()
    }
    failed = _write("policy export", folder, texts)
    if failed is not None:
        return failed
    definitions = sum(name.startswith("definitions/") for name in files)
    print(
        f"wrote {definitions} policy definitions, the initiative {export.INITIATIVE_NAME} and "
        f"the {len(export.not_expressible())} rules Azure Policy cannot express (with why) to "
        f"{printable(str(folder))}",
        file=sys.stdout,
    )
    return ExitCode.OK

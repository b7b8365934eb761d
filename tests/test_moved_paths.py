"""The modules that left blob_safetynet.sweeper still import from their old paths for one
release, each with a DeprecationWarning that names its new path."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from blob_safetynet.sweeper._moved import MOVED, SPLIT
from tests import tree


@pytest.fixture
def fresh_import(request: pytest.FixtureRequest) -> Iterator[str]:
    """The old path, out of sys.modules before and after, so its import runs (and warns) here."""
    old: str = request.param
    sys.modules.pop(old, None)
    yield old
    sys.modules.pop(old, None)


@pytest.mark.parametrize("fresh_import", sorted(MOVED), indirect=True)
def test_an_old_path_imports_the_new_module_and_warns(fresh_import: str) -> None:
    """Importing an old path warns with its new path and yields the very module found there
    (or, for a module cut in parts since, every public name of every part)."""
    new = MOVED[fresh_import]
    with pytest.warns(DeprecationWarning, match=f"{fresh_import} moved to {new}"):
        module = importlib.import_module(fresh_import)
    parts = [importlib.import_module(name) for name in (new, *SPLIT.get(fresh_import, ()))]
    if fresh_import not in SPLIT:
        assert module is parts[0]
    for part in parts:
        public = [name for name in vars(part) if not name.startswith("_")]
        assert [name for name in public if getattr(module, name) is not getattr(part, name)] == []


def test_an_old_path_still_serves_its_names_with_one_warning_at_the_importer() -> None:
    """`from <old> import <name>` works, private names included, and the warning points at the
    importing line, not at the alias module."""
    code = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "from blob_safetynet.sweeper.protocol import UploadProtocol, _content_of\n"
        "from blob_safetynet.protocol.upload import UploadProtocol as New\n"
        "assert UploadProtocol is New\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=tree.TREE,
        env=tree.environment(),
    )
    warned = [line for line in done.stderr.splitlines() if "DeprecationWarning" in line]
    assert len(warned) == 1
    assert warned[0].startswith("<string>:3: DeprecationWarning: blob_safetynet.sweeper.protocol")

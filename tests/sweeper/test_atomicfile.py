"""blob_safetynet.settings.atomicfile: outputs checked before any work, never onto an input, written atomically."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from blob_safetynet.settings import atomicfile
from blob_safetynet.settings.atomicfile import OutputPathError


def test_write_text_creates_the_file_with_owner_only_mode(tmp_path: Path) -> None:
    """A new output holds exactly the text and is readable by its owner only."""
    target = tmp_path / "plan.json"
    atomicfile.write_text(target, "{}\n")
    assert target.read_text(encoding="utf-8") == "{}\n"
    assert stat.S_IMODE(target.stat().st_mode) & 0o077 == 0


def test_write_leaves_no_temporary_file_behind(tmp_path: Path) -> None:
    """After a write the folder holds the target only."""
    atomicfile.write_bytes(tmp_path / "out.zip", b"PK")
    assert [p.name for p in tmp_path.iterdir()] == ["out.zip"]


def test_a_symlink_at_the_target_is_replaced_not_written_through(tmp_path: Path) -> None:
    """Writing over a planted symlink replaces the link; the file it pointed to is untouched."""
    victim = tmp_path / "victim"
    victim.write_text("keep", encoding="utf-8")
    target = tmp_path / "out.json"
    target.symlink_to(victim)
    atomicfile.write_text(target, "new")
    assert victim.read_text(encoding="utf-8") == "keep"
    assert not target.is_symlink()
    assert target.read_text(encoding="utf-8") == "new"


def test_a_failed_write_keeps_the_old_content_and_removes_the_temporary(tmp_path: Path) -> None:
    """An exception while writing leaves the target as it was and no temporary file."""
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")

    def interrupted() -> None:
        with atomicfile.replacing(target) as stream:
            stream.write(b"half")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        interrupted()
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_the_temporary_is_opened_exclusively(tmp_path: Path) -> None:
    """A file planted at the temporary name is never opened: the open fails instead."""
    planted = tmp_path / "planted"
    link = tmp_path / "link"
    link.symlink_to(planted)
    with pytest.raises(FileExistsError):
        atomicfile._open_exclusive(link, 0o600)
    assert not planted.exists()


@pytest.mark.parametrize(
    ("relative", "reason"),
    [
        ("missing/plan.json", "does not exist"),
        ("afile/plan.json", "is not a folder"),
        ("adir", "is a folder"),
        ("", "names no file"),
        ("n" * 300, "File name too long"),
        ("n" * 300 + "/plan.json", "File name too long"),
        ("a\x00b", "NUL"),
    ],
)
def test_check_output_path_refuses_unusable_targets(
    tmp_path: Path, relative: str, reason: str
) -> None:
    """A missing folder, a path under a file, a folder target, an empty name, a name the
    system cannot look up (too long, a NUL) is refused with the reason."""
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    (tmp_path / "adir").mkdir()
    path = tmp_path / relative if relative else Path("")
    with pytest.raises(OutputPathError, match=reason):
        atomicfile.check_output_path(path)


def test_check_output_path_refuses_a_read_only_folder(tmp_path: Path) -> None:
    """An output in a folder the process may not write is refused."""
    if os.geteuid() == 0:
        pytest.skip("root writes everywhere")
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o500)
    with pytest.raises(OutputPathError, match="not writable"):
        atomicfile.check_output_path(folder / "out")


def test_check_output_path_escapes_control_characters(tmp_path: Path) -> None:
    """A path with a terminal escape is shown escaped in the message."""
    with pytest.raises(OutputPathError) as caught:
        atomicfile.check_output_path(tmp_path / "no\x1b[2Jdir" / "out")
    assert "\x1b" not in str(caught.value)


def test_refuse_same_catches_hard_links_symlinks_and_spellings(tmp_path: Path) -> None:
    """The same file by inode, through a symlink or by another spelling is refused."""
    source = tmp_path / "plan.json"
    source.write_text("{}", encoding="utf-8")
    hard = tmp_path / "hard.json"
    os.link(source, hard)
    soft = tmp_path / "soft.json"
    soft.symlink_to(source)
    for output in (hard, soft, tmp_path / "." / "plan.json", source):
        with pytest.raises(OutputPathError, match="also an input"):
            atomicfile.refuse_same(output, None, source)


def test_refuse_same_catches_the_sqlite_database_and_companions(tmp_path: Path) -> None:
    """The file behind a sqlite URL, and its -wal journal, are refused as outputs."""
    db = tmp_path / "state db.sqlite"
    db.write_bytes(b"")
    url = "sqlite:///" + str(db).replace(" ", "%20")
    for output in (db, tmp_path / "state db.sqlite-wal"):
        with pytest.raises(OutputPathError, match="also an input"):
            atomicfile.refuse_same(output, url)


def test_refuse_same_allows_distinct_files_and_other_urls(tmp_path: Path) -> None:
    """A different file, a PostgreSQL URL and in-memory SQLite are no conflict."""
    atomicfile.refuse_same(
        tmp_path / "out", tmp_path / "in", "postgresql://u:p@h/db", "sqlite://", None
    )


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A folder outside the checkout, holding a file a link could point at."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "victim").write_text("keep", encoding="utf-8")
    return folder


@pytest.fixture
def checkout(tmp_path: Path, elsewhere: Path) -> Path:
    """A checkout (the base) with a committed link `reports` to the folder elsewhere."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    (folder / "reports").symlink_to(elsewhere, target_is_directory=True)
    return folder


@pytest.mark.parametrize("openat", [True, False])
def test_a_linked_folder_under_the_base_is_never_written_through(
    checkout: Path, elsewhere: Path, openat: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write, a new file, an append, a removal and new folders under a base whose path goes
    through a link are refused as a symbolic link, by the descriptor walk and by the path walk
    of systems without `openat`; the folder it points to is unchanged."""
    monkeypatch.setattr(atomicfile, "_AT_SUPPORTED", openat)
    target = checkout / "reports" / "out.json"
    calls = [
        lambda: atomicfile.write_text(target, "x", base=checkout),
        lambda: atomicfile.create(target, base=checkout),
        lambda: atomicfile.append_text(target, "x", base=checkout),
        lambda: atomicfile.remove(checkout / "reports" / "victim", base=checkout),
        lambda: atomicfile.make_folders(checkout / "reports" / "sub", base=checkout),
    ]
    for call in calls:
        with pytest.raises(OSError, match="symbolic link"):
            call()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["victim"]
    assert (elsewhere / "victim").read_text(encoding="utf-8") == "keep"


def test_the_working_directory_is_the_base_of_a_path_inside_it(
    checkout: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a base, a path inside the working directory is reached through real folders
    only: a committed link on the way is refused before any work, and by the write itself."""
    monkeypatch.chdir(checkout)
    with pytest.raises(OutputPathError, match="symbolic link"):
        atomicfile.check_output_path(Path("reports") / "out.json")
    with pytest.raises(OSError, match="symbolic link"):
        atomicfile.write_text(checkout / "reports" / "out.json", "x")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["victim"]


def test_a_path_outside_the_base_is_refused(checkout: Path, elsewhere: Path) -> None:
    """A path that climbs out of the base (`..`) is refused, not written."""
    with pytest.raises(OSError, match="outside"):
        atomicfile.write_text(checkout / ".." / "elsewhere" / "new", "x", base=checkout)
    assert not (elsewhere / "new").exists()


def test_create_replaces_a_planted_link_with_an_owner_only_file(
    tmp_path: Path, elsewhere: Path
) -> None:
    """A file written in place (a stream) at a planted link: the link is replaced by a new
    file of mode 0600, the file it pointed to is unchanged."""
    target = tmp_path / "verdicts.jsonl"
    target.symlink_to(elsewhere / "victim")
    with atomicfile.create(target) as stream:
        stream.write(b"line\n")
    assert not target.is_symlink()
    assert target.read_bytes() == b"line\n"
    assert stat.S_IMODE(target.stat().st_mode) & 0o077 == 0
    assert (elsewhere / "victim").read_text(encoding="utf-8") == "keep"


def test_append_refuses_a_link_and_creates_owner_only(tmp_path: Path, elsewhere: Path) -> None:
    """An append to a link is refused (the file it points to is unchanged); to a missing name
    it creates the file with mode 0600, and a second append adds to it."""
    link = tmp_path / "summary.md"
    link.symlink_to(elsewhere / "victim")
    with pytest.raises(OSError, match="symbolic link"):
        atomicfile.append_text(link, "x")
    assert (elsewhere / "victim").read_text(encoding="utf-8") == "keep"
    target = tmp_path / "outputs.txt"
    atomicfile.append_text(target, "a\n")
    atomicfile.append_text(target, "b\n")
    assert target.read_text(encoding="utf-8") == "a\nb\n"
    assert stat.S_IMODE(target.stat().st_mode) & 0o077 == 0


def test_make_folders_creates_owner_only_folders_and_remove_never_follows(
    tmp_path: Path, elsewhere: Path
) -> None:
    """New folders get mode 0700; removing a link removes the link, not what it names."""
    made = atomicfile.make_folders(tmp_path / "a" / "b", base=tmp_path)
    assert made.is_dir()
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) & 0o077 == 0
    link = made / "old.json"
    link.symlink_to(elsewhere / "victim")
    atomicfile.remove(link, base=tmp_path)
    assert not os.path.lexists(link)
    assert (elsewhere / "victim").read_text(encoding="utf-8") == "keep"

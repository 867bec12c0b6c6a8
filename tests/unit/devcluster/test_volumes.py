"""The kubelet's atomic volume layout: readers through the top-level names see whole
updates, swapped in one rename."""

import os
from pathlib import Path

from devcluster.volumes import DATA, write_atomically


def test_files_appear_through_the_data_link(tmp_path: Path) -> None:
    volume = tmp_path / "certs"
    assert write_atomically(volume, {"tls.crt": (b"one", 0o644)}, gid=None)
    assert (volume / "tls.crt").read_bytes() == b"one"
    assert os.readlink(volume / "tls.crt") == f"{DATA}/tls.crt"
    assert os.readlink(volume / DATA).startswith("..")


def test_unchanged_content_is_not_rewritten(tmp_path: Path) -> None:
    volume = tmp_path / "certs"
    write_atomically(volume, {"tls.crt": (b"one", 0o644)}, gid=None)
    target = os.readlink(volume / DATA)
    assert not write_atomically(volume, {"tls.crt": (b"one", 0o644)}, gid=None)
    assert os.readlink(volume / DATA) == target


def test_an_update_swaps_the_whole_set_and_drops_the_old_one(tmp_path: Path) -> None:
    volume = tmp_path / "certs"
    write_atomically(volume, {"tls.crt": (b"one", 0o644), "old": (b"x", 0o644)}, gid=None)
    before = os.readlink(volume / DATA)
    # An open directory handle, like a bind mount, sees the update.
    descriptor = os.open(volume, os.O_RDONLY)
    try:
        assert write_atomically(volume, {"tls.crt": (b"two", 0o644)}, gid=None)
        assert Path(f"/proc/self/fd/{descriptor}/tls.crt").read_bytes() == b"two"
    finally:
        os.close(descriptor)
    assert not (volume / "old").exists()
    assert not (volume / before).exists()
    assert {p.name for p in volume.iterdir() if p.name.startswith("..")} == {
        DATA,
        os.readlink(volume / DATA),
    }


def test_an_fs_group_owns_the_files_and_may_read_them(tmp_path: Path) -> None:
    volume = tmp_path / "certs"
    write_atomically(volume, {"nested/key": (b"k", 0o600)}, gid=65532)
    real = (volume / DATA).resolve() / "nested" / "key"
    assert real.stat().st_gid == 65532
    assert real.stat().st_mode & 0o777 == 0o640
    assert (volume / "nested" / "key").read_bytes() == b"k"

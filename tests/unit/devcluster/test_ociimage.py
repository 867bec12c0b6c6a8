"""OCI image archives of static binaries: the layout containerd imports, reproducibly."""

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from devcluster.ociimage import ImageError, image_archive, main


def members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def blob(files: dict[str, bytes], digest: str) -> bytes:
    data = files[f"blobs/sha256/{digest.split(':', 1)[1]}"]
    assert f"sha256:{hashlib.sha256(data).hexdigest()}" == digest
    return data


def test_the_index_names_the_image_and_every_blob_matches_its_digest() -> None:
    archive = image_archive(
        "localhost/headroom/probe:1", files={"/probe": b"\x7fELF"}, entrypoint=["/probe"]
    )
    files = members(archive)
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    [entry] = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "localhost/headroom/probe:1"
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == "1"
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    manifest = json.loads(blob(files, entry["digest"]))
    config = json.loads(blob(files, manifest["config"]["digest"]))
    [layer_ref] = manifest["layers"]
    layer = blob(files, layer_ref["digest"])
    assert config["config"]["Entrypoint"] == ["/probe"]
    assert config["rootfs"]["diff_ids"] == [layer_ref["digest"]]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        [member] = tar.getmembers()
        assert (member.name, member.mode, member.uid, member.mtime) == ("probe", 0o755, 0, 0)
        assert tar.extractfile(member).read() == b"\x7fELF"


def test_the_archive_is_reproducible() -> None:
    def build() -> bytes:
        return image_archive("localhost/x:1", files={"/x": b"x"}, entrypoint=["/x"])

    assert build() == build()


@pytest.mark.parametrize(
    ("name", "files", "entrypoint", "message"),
    [
        ("localhost/x", {"/x": b""}, ["/x"], "repository and a :tag"),
        ("localhost:5000/x", {"/x": b""}, ["/x"], "repository and a :tag"),
        ("localhost/x:1", {}, ["/x"], "at least one file"),
        ("localhost/x:1", {"/x": b""}, [], "an entrypoint"),
    ],
)
def test_bad_arguments_are_refused(
    name: str, files: dict[str, bytes], entrypoint: list[str], message: str
) -> None:
    with pytest.raises(ImageError, match=message):
        image_archive(name, files=files, entrypoint=entrypoint)


def test_the_command_writes_the_archive(tmp_path: Path) -> None:
    source = tmp_path / "pause"
    source.write_bytes(b"pause")
    out = tmp_path / "pause.tar"
    assert main(["--name", "localhost/p:1", "--add", f"/pause={source}",
                 "--entrypoint", "/pause", "--out", str(out)]) == 0  # fmt: skip
    assert out.read_bytes() == image_archive(
        "localhost/p:1", files={"/pause": b"pause"}, entrypoint=["/pause"]
    )


def test_the_command_refuses_a_relative_target(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["--name", "localhost/p:1", "--add", f"pause={tmp_path}", "--entrypoint", "/p",
              "--out", str(tmp_path / "o.tar")])  # fmt: skip

"""Single-layer OCI image archives of static binaries, for the real-node guests.

The guests cannot pull from anywhere, so the images their pods run (the pause image,
the tier's test programs) are written here as OCI image-layout tarballs and imported
into the guest's containerd (``ctr -n k8s.io images import``). Each image is one
uncompressed layer holding the given files, like an image built ``FROM scratch``. The
output is reproducible: every timestamp is zero and every owner root.

    python -m devcluster.ociimage --name localhost/headroom/probe:1 \\
        --add /probe=path/to/probe --entrypoint /probe --out probe.tar
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"


class ImageError(ValueError):
    """The image cannot be written as asked; the message says which argument is wrong."""


@dataclass(frozen=True)
class Blob:
    data: bytes

    @property
    def digest(self) -> str:
        return f"sha256:{hashlib.sha256(self.data).hexdigest()}"

    def descriptor(self, media_type: str, **extra: Any) -> dict[str, Any]:
        return {"mediaType": media_type, "digest": self.digest, "size": len(self.data), **extra}


def _json(document: Mapping[str, Any]) -> Blob:
    return Blob(json.dumps(document, sort_keys=True, separators=(",", ":")).encode())


def _tar_member(tar: tarfile.TarFile, name: str, data: bytes, *, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    info.uid = info.gid = 0
    tar.addfile(info, io.BytesIO(data))


def _layer(files: Mapping[str, bytes]) -> Blob:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(files):
            _tar_member(tar, path.lstrip("/"), files[path], mode=0o755)
    return Blob(buffer.getvalue())


def image_archive(name: str, *, files: Mapping[str, bytes], entrypoint: Sequence[str]) -> bytes:
    """An OCI image-layout tarball of one image named ``name`` (``repository:tag``)."""
    repository, _, tag = name.rpartition(":")
    if not repository or not tag or "/" in tag:
        raise ImageError(f"image name {name!r} needs a repository and a :tag")
    if not files:
        raise ImageError("an image needs at least one file")
    if not entrypoint:
        raise ImageError("an image needs an entrypoint")
    layer = _layer(files)
    config = _json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": list(entrypoint)},
            "rootfs": {"type": "layers", "diff_ids": [layer.digest]},
        }
    )
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": config.descriptor(CONFIG),
            "layers": [layer.descriptor(LAYER)],
        }
    )
    index = _json(
        {
            "schemaVersion": 2,
            "mediaType": INDEX,
            "manifests": [
                manifest.descriptor(
                    MANIFEST,
                    platform={"architecture": "amd64", "os": "linux"},
                    annotations={
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": tag,
                    },
                )
            ],
        }
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _tar_member(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}', mode=0o644)
        _tar_member(tar, "index.json", index.data, mode=0o644)
        for blob in (layer, config, manifest):
            _tar_member(tar, f"blobs/sha256/{blob.digest.split(':', 1)[1]}", blob.data, mode=0o644)
    return buffer.getvalue()


def _file_argument(text: str) -> tuple[str, Path]:
    target, sep, source = text.partition("=")
    if not sep or not target.startswith("/") or not source:
        raise argparse.ArgumentTypeError(f"{text!r}: expected /path/in/image=path/on/host")
    return target, Path(source)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="repository:tag")
    parser.add_argument("--add", type=_file_argument, action="append", required=True)
    parser.add_argument("--entrypoint", action="append", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    files = {target: source.read_bytes() for target, source in args.add}
    try:
        archive = image_archive(args.name, files=files, entrypoint=args.entrypoint)
    except ImageError as err:
        parser.error(str(err))
    args.out.write_bytes(archive)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

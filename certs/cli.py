"""``headroom-certs``: write a CA and a serving certificate for local runs and tests.

Writes ``ca.crt``, ``tls.crt`` and ``tls.key`` (and ``ca.key`` on request) into a directory,
the same layout a cert-manager Secret volume has, so the output can be passed straight to
``--cert-dir`` / ``--metrics-cert-path``. ``--ca-from`` signs with an existing CA instead of
a new one, which is how a rotation keeps clients' trust.
"""

import argparse
import datetime
import ipaddress
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from certs.generate import IssuedCertificate, generate_ca, generate_serving, service_dns_names
from certs.source import CA_FILE, CERT_FILE, KEY_FILE

CA_KEY_FILE = "ca.key"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="headroom-certs",
        description="Generate a CA and a serving certificate for a Headroom server.",
    )
    parser.add_argument("--out-dir", required=True, type=Path, help="directory to write into")
    parser.add_argument("--service", help="Service name; adds <svc>.<ns>.svc and friends")
    parser.add_argument("--namespace", help="namespace of --service")
    parser.add_argument(
        "--dns", action="append", default=[], metavar="NAME", help="extra DNS SAN (repeatable)"
    )
    parser.add_argument(
        "--ip", action="append", default=[], metavar="ADDR", help="extra IP SAN (repeatable)"
    )
    parser.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    parser.add_argument(
        "--ca-from", type=Path, metavar="DIR", help="sign with ca.crt/ca.key from DIR"
    )
    parser.add_argument("--write-ca-key", action="store_true", help="also write ca.key")
    args = parser.parse_args(argv)
    if (args.service is None) != (args.namespace is None):
        parser.error("--service and --namespace go together")
    if args.days < 1:
        parser.error("--days must be at least 1")
    for ip in args.ip:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            parser.error(f"--ip {ip!r} is not an IP address")
    dns_names = list(args.dns)
    if args.service is not None:
        dns_names = service_dns_names(service=args.service, namespace=args.namespace) + dns_names
    if not dns_names and not args.ip:
        parser.error("give --service/--namespace, --dns or --ip")

    now = datetime.datetime.now(datetime.UTC)
    valid_for = datetime.timedelta(days=args.days)
    if args.ca_from is not None:
        try:
            ca = IssuedCertificate(
                cert_pem=(args.ca_from / CA_FILE).read_bytes(),
                key_pem=(args.ca_from / CA_KEY_FILE).read_bytes(),
            )
        except OSError as err:
            parser.error(f"--ca-from: {err}")
    else:
        ca = generate_ca(common_name="headroom-local-ca", valid_for=valid_for, now=now)
    try:
        serving = generate_serving(
            ca=ca, dns_names=dns_names, ip_addresses=args.ip, valid_for=valid_for, now=now
        )
    except ValueError as err:
        parser.error(str(err))

    out: Path = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    _write(out / CA_FILE, ca.cert_pem, private=False)
    if args.write_ca_key:
        _write(out / CA_KEY_FILE, ca.key_pem, private=True)
    # A watcher polling mid-write may see a mismatched pair once; it keeps the old one and retries.
    _write(out / KEY_FILE, serving.key_pem, private=True)
    _write(out / CERT_FILE, serving.cert_pem, private=False)
    sans = ", ".join([*dns_names, *args.ip])
    sys.stdout.write(f"wrote {out}/{{{CA_FILE},{CERT_FILE},{KEY_FILE}}} for {sans}\n")
    return 0


def _write(path: Path, data: bytes, *, private: bool) -> None:
    # Write-then-rename so a watcher never reads a half-written file.
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())

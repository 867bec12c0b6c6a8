import stat
from pathlib import Path

import pytest
from cryptography import x509

from certs.cli import main
from certs.tls import check_pair
from tests.unit.cli import usage_error


def _sans(directory: Path) -> list[str]:
    cert = x509.load_pem_x509_certificate((directory / "tls.crt").read_bytes())
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(value) for value in ext.get_values_for_type(x509.DNSName)] + [
        str(value) for value in ext.get_values_for_type(x509.IPAddress)
    ]


def test_writes_a_secret_shaped_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "certs"
    code = main(
        ["--out-dir", str(out), "--service", "hr", "--namespace", "ns", "--ip", "127.0.0.1"]
    )
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert _sans(out) == ["hr", "hr.ns", "hr.ns.svc", "hr.ns.svc.cluster.local", "127.0.0.1"]
    check_pair(cert_pem=(out / "tls.crt").read_bytes(), key_pem=(out / "tls.key").read_bytes())
    assert stat.S_IMODE((out / "tls.key").stat().st_mode) == 0o600
    assert "hr.ns.svc" in capsys.readouterr().out


def test_ca_from_keeps_the_trust_anchor(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(["--out-dir", str(first), "--dns", "localhost", "--write-ca-key"]) == 0
    assert stat.S_IMODE((first / "ca.key").stat().st_mode) == 0o600
    assert main(["--out-dir", str(second), "--ip", "127.0.0.1", "--ca-from", str(first)]) == 0
    assert (second / "ca.crt").read_bytes() == (first / "ca.crt").read_bytes()
    ca = x509.load_pem_x509_certificate((first / "ca.crt").read_bytes())
    x509.load_pem_x509_certificate((second / "tls.crt").read_bytes()).verify_directly_issued_by(ca)
    assert not (second / "ca.key").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--service", "hr"], "--service and --namespace go together", id="no-ns"),
        pytest.param([], "give --service/--namespace, --dns or --ip", id="no-sans"),
        pytest.param(["--ip", "localhost"], "is not an IP address", id="bad-ip"),
        pytest.param(["--dns", "x", "--days", "0"], "--days must be at least 1", id="bad-days"),
        pytest.param(["--dns", "x", "--ca-from", "/nonexistent"], "--ca-from", id="no-ca"),
    ],
)
def test_bad_flags_fail_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert message in usage_error(main, ["--out-dir", str(tmp_path), *args], capsys)

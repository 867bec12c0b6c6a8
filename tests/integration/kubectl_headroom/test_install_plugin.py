"""The plugin's install instructions, run as the runbook and the README show them, in a fresh
home: afterwards kubectl finds ``kubectl headroom`` on PATH and it talks to the cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.integration.conftest import Cluster
from tests.integration.runbook import run_shell, runbook_commands, shell_environ
from tests.unit.docs.markdown import README, shell_commands

PLUGIN = "kubectl-headroom"


def _install_commands() -> list[str]:
    """The runbook's install block: its only shell commands before the first subsection."""
    commands = runbook_commands("The kubectl plugin")
    assert commands[-1] == "kubectl headroom version", commands
    return commands


def test_the_readme_shows_the_runbooks_install_commands() -> None:
    readme = shell_commands(README.read_text())
    start = readme.index(_install_commands()[0])
    assert readme[start : start + len(_install_commands())] == _install_commands()


def test_the_install_commands_put_the_plugin_on_path(
    control_plane: Cluster, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # PATH as a shell's: ~/.local/bin, kubectl, and none of the test runner's own copies.
    system_path = [
        entry
        for entry in os.environ["PATH"].split(os.pathsep)
        if not (Path(entry) / PLUGIN).exists()
    ]
    env = shell_environ(
        control_plane,
        HOME=str(home),
        # Only the download cache is shared, so the packages are not fetched again.
        PIP_CACHE_DIR=str(Path.home() / ".cache" / "pip"),
        PATH=os.pathsep.join([str(home / ".local" / "bin"), *system_path]),
    )
    env.pop("VIRTUAL_ENV", None)
    results: list[subprocess.CompletedProcess[str]] = []
    for command in _install_commands():
        results.append(run_shell(command, env=env, timeout=900))
        assert results[-1].returncode == 0, f"{command}:\n{results[-1].stderr}"
    linked = shutil.which(PLUGIN, path=env["PATH"])
    assert linked == str(home / ".local" / "bin" / PLUGIN)
    assert Path(linked).resolve().is_relative_to(home / ".local" / "share" / "kube-headroom")
    version = results[-1].stdout.splitlines()
    server = control_plane.kubectl("version", "-o", "json")
    assert version[0].startswith("Client Version: ")
    assert version[1].startswith("Server Version: v")
    assert version[1].removeprefix("Server Version: ") in server

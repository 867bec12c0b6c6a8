"""The host end of a guest's node agent (``hack/go/node-agent``): reads of the guest's
files over its virtio-serial port, which qemu exposes as a unix socket here.

The cgroups the kubelet writes are read this way rather than through the kubelet's exec
path: a pod's own cgroup (``cpu.max`` of the pod, above its containers) is invisible
from inside its containers, a scratch image has no shell, and each exec costs a runc
start in the emulated guest, too slow and too heavy to time a cgroup change to a fraction
of a second. The serial port involves neither the kubelet nor the network.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

# A unix socket path must fit in sun_path.
MAX_SOCKET_PATH = 107


class GuestAgentError(RuntimeError):
    """The agent did not answer, or answered with errors for every file asked for."""


class GuestAgent:
    def __init__(self, path: Path, *, timeout: float = 10.0) -> None:
        if len(str(path)) > MAX_SOCKET_PATH:
            raise GuestAgentError(f"socket path too long for a unix socket: {path}")
        self.path = path
        self.timeout = timeout
        self._socket: socket.socket | None = None
        self._buffer = b""
        self._lock = threading.Lock()
        self._next_id = 0

    def _connected(self) -> socket.socket:
        if self._socket is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(self.path))
            self._socket = sock
        return self._socket

    def _line(self, sock: socket.socket, deadline: float) -> bytes:
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise GuestAgentError(f"no answer from the guest agent at {self.path}")
            sock.settimeout(remaining)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                raise GuestAgentError(f"the guest agent at {self.path} closed the connection")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _ask(self, request: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            sock = self._connected()
            sock.sendall(json.dumps({"id": request_id, **request}).encode() + b"\n")
            while True:
                answer: dict[str, Any] = json.loads(self._line(sock, deadline))
                # A late answer to a request that timed out comes first: skip it.
                if answer.get("id") == request_id:
                    return answer

    def read(self, *patterns: str, tail: int = 0, timeout: float | None = None) -> dict[str, str]:
        """Every file matching the globs ``patterns`` in the guest (the last ``tail``
        bytes of each, when given): path to content. Files that vanish while being read
        are left out."""
        answer = self._ask({"read": list(patterns), "tail": tail}, timeout)
        files: dict[str, str] = answer.get("files") or {}
        return files

    def shift_clock(self, seconds: float) -> str:
        """Move the guest's wall clock by ``seconds`` (back, when negative); the guest's
        new time. A fault injection: what the guest's daemons do once a time has come."""
        answer = self._ask({"shiftClockMillis": round(seconds * 1000)}, None)
        if answer.get("errors"):
            raise GuestAgentError(f"the guest's clock did not move: {answer['errors']}")
        clock: str = answer["clock"]
        return clock

    def wait(self, *, timeout: float) -> None:
        """Until the agent answers (the guest has booted far enough to start it)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.read("/proc/uptime", timeout=2.0):
                    return
            except (OSError, GuestAgentError):
                self.close()
            if time.monotonic() > deadline:
                raise GuestAgentError(
                    f"the guest agent at {self.path} did not answer in {timeout}s"
                )
            time.sleep(0.5)

    def close(self) -> None:
        with self._lock:
            if self._socket is not None:
                self._socket.close()
                self._socket = None
            self._buffer = b""

"""The OTLP receiver (``slime-trace-viewer collect``) as a subprocess on free loopback
ports, for tests that send it SGLang's own exports."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from tests.support.browser import free_port

ROOT = Path(__file__).resolve().parents[2]
#: Hang guard, generous: a busy 2-core machine starts Python and grpc slowly.
STARTUP_SECONDS = 120


@dataclass
class Receiver:
    """A running receiver: its folder, ports, process and the line it announced itself by."""

    folder: Path
    http_port: int
    grpc_port: int
    process: subprocess.Popen
    first_line: str

    @property
    def endpoint_url(self) -> str:
        """The OTLP/HTTP base address a live stream is installed with."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def traces_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/v1/traces"

    def endpoint(self, protocol: str) -> str:
        """Where an exporter of ``protocol`` (``grpc`` or ``http/protobuf``) sends."""
        return f"127.0.0.1:{self.grpc_port}" if protocol == "grpc" else self.traces_url

    def stop(self) -> str:
        """SIGTERM, as a service manager stops it: the receiver writes what is waiting and
        exits cleanly; what it printed after its first line."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        out, err = self.process.communicate(timeout=STARTUP_SECONDS)
        assert self.process.returncode == 0, err
        return out

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate(timeout=STARTUP_SECONDS)

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        try:
            if kind is None:
                self.stop()
        finally:  # a stop that failed or hung leaves no receiver holding ports and lock
            self.kill()


def start_receiver(folder: Path, http_port: int = 0, grpc_port: int = 0) -> Receiver:
    """``slime-trace-viewer collect folder`` on loopback ports (free ones unless given: a
    receiver restarted where its senders send), once it has announced where it listens
    (a hang guard of :data:`STARTUP_SECONDS`)."""
    http_port, grpc_port = http_port or free_port(), grpc_port or free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "slime_trace_widget", "collect", str(folder),
         "--http", f"127.0.0.1:{http_port}", "--grpc", f"127.0.0.1:{grpc_port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()),
                              daemon=True)
    reader.start()
    reader.join(STARTUP_SECONDS)
    if not lines or not lines[0]:
        process.kill()
        raise AssertionError(f"the receiver did not start: {process.communicate()[1]}")
    return Receiver(folder, http_port, grpc_port, process, lines[0].strip())


def read_until_closed(client: socket.socket) -> bytes:
    """What the receiver sends until it closes the connection, sending the body's next
    byte whenever it is quiet for a moment (a trickle; 600 turns as a hang guard)."""
    client.settimeout(0.2)
    answer = b""
    for _ in range(600):
        try:
            chunk = client.recv(4096)
        except TimeoutError:
            client.sendall(b"x")
            continue
        if not chunk:
            break
        answer += chunk
    return answer

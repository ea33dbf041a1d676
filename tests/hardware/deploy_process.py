"""``robot-rl deploy`` as a child process against the sim bridge, for the fault tests and the fault benchmark.

The deploy's stdout and stderr are collected on threads (the supervisor it starts inherits its stderr, so
a plain ``communicate()`` would wait for the supervisor as well), and the supervisor's pid is read from
the line deploy prints, so a test can end a supervisor left damping a robot whose deploy was killed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

POLICY = Path(__file__).resolve().parents[2] / "policies" / "a1_flat" / "policy.onnx"


class DeployProcess:
    def __init__(self, domain_id: int, duration_s: float = 60.0, *extra: str,
                 fifo_priority: int | None = None) -> None:
        cmd = [sys.executable, "-m", "robot_rl.cli", "deploy", "--interface", "unitree-dds", "--domain-id",
               str(domain_id), "--policy", str(POLICY), "--duration-s", f"{duration_s:g}", "--command", "0.3", "0",
               "0", *extra]
        if fifo_priority is not None:
            cmd += ["--fifo-priority", str(fifo_priority)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [threading.Thread(target=self._collect, args=(stream, lines), daemon=True)
                         for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for thread in self._readers:
            thread.start()

    @staticmethod
    def _collect(stream, lines: list[str]) -> None:
        for line in stream:
            lines.append(line)

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    @property
    def stderr(self) -> str:
        return "".join(self.err)

    def supervisor_pid(self, timeout_s: float = 30.0) -> int | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = re.search(r"supervisor: pid (\d+)", self.stdout)
            if found:
                return int(found.group(1))
            if self.proc.poll() is not None:
                return None
            time.sleep(0.02)
        return None

    def signal(self, sig: int) -> float:
        """Send ``sig``; returns time.monotonic() just before sending."""
        t = time.monotonic()
        self.proc.send_signal(sig)
        return t

    def wait(self, timeout_s: float) -> int:
        return self.proc.wait(timeout=timeout_s)

    def wait_stderr(self, text: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if text in self.stderr:
                return True
            time.sleep(0.02)
        return False

    def end(self) -> None:
        """Kill the deploy (resuming it first if stopped) and its supervisor, whatever state they are in."""
        pid = re.search(r"supervisor: pid (\d+)", self.stdout)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(timeout=10)
        if pid:
            kill_pid(int(pid.group(1)))
        for thread in self._readers:
            thread.join(timeout=5)


def kill_pid(pid: int) -> None:
    """SIGKILL one process we started (a supervisor is not our child: deploy started it)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # An exited child of an exited deploy is reaped by init; a zombie still answers kill 0 briefly.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False

"""A Spark standalone cluster on this machine for the tests: a master and two workers
started with ``spark-class`` from the installed PySpark, one core each.

The second worker runs in a mount namespace of its own with a private ``/tmp`` (a
tmpfs): like a worker on another host, it cannot see the files the driver (or the test)
writes under ``/tmp``. The workers' directories (their executors' logs, and the scratch
space in which executors on one host read each other's shuffle files) are under
``/var/tmp``, which both see.

Where it can be set up (root, ``ip`` from iproute2), the second worker is also in a
network namespace of its own, joined to this one by a veth pair: another host on a
small network, with its own address. The master, the first worker, the drivers
(``SPARK_LOCAL_IP``, see :meth:`StandaloneCluster.driver_environment`) and the servers
its executors use listen on this side's address, :attr:`StandaloneCluster.host`.
Without it, every process uses 127.0.0.1 and executors on that one "host" read each
other's shuffle files from a scratch space both workers see.

Needs root (``unshare --mount``); :func:`start_cluster` raises :class:`Unavailable`
otherwise.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from tests.servers import free_port

SPARK_HOME = os.path.dirname(pyspark.__file__)
SPARK_CLASS = os.path.join(SPARK_HOME, "bin", "spark-class")


class Unavailable(RuntimeError):
    """The cluster cannot be started here; the message says why."""


@dataclass
class Worker:
    """A worker's process and work directory (its executors' logs are in
    ``<work_dir>/<app id>/<executor id>/stderr``)."""

    process: subprocess.Popen[bytes]
    work_dir: Path
    isolated: bool
    #: How it was started (to start it again after a kill).
    command: list[str] = field(default_factory=list)
    log: Path = Path()
    env: dict[str, str] = field(default_factory=dict)

    def kill(self) -> None:
        """SIGKILL the worker and its executors (its process group): its host is gone."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def executor_logs(self) -> list[str]:
        """The text of every executor log the worker has."""
        return [path.read_text(errors="replace") for path in self.work_dir.glob("app-*/*/stderr")]

    def finished_tasks(self) -> int:
        """Tasks its executors finished."""
        return sum(log.count("Finished task") for log in self.executor_logs())

    def task_failures(self) -> list[str]:
        """The exception line of every task its executors failed."""
        failures = []
        for log in self.executor_logs():
            for match in re.finditer(r"Exception in task [^\n]*\n[^\n]*\n", log):
                failures.append(match.group(0).strip())
        return failures


@dataclass
class Network:
    """A network namespace joined to this one by a veth pair: ``host`` is this side's
    address, ``peer`` the namespace's (a /24 of their own)."""

    namespace: str
    host: str
    peer: str

    @classmethod
    def make(cls) -> Network | None:
        """Set one up (None if this machine does not allow it: no root, no ``ip``,
        no network namespaces)."""
        if os.geteuid() != 0 or shutil.which("ip") is None:
            return None
        tag = f"{os.getpid() % 100000:05d}"
        subnet = f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}"
        network = cls(f"squall-{tag}", f"{subnet}.1", f"{subnet}.2")
        outside, inside = f"sqh{tag}", f"sqn{tag}"
        inns = ["ip", "netns", "exec", network.namespace]
        steps = [
            ["ip", "netns", "add", network.namespace],
            ["ip", "link", "add", outside, "type", "veth", "peer", "name", inside],
            ["ip", "link", "set", inside, "netns", network.namespace],
            ["ip", "addr", "add", f"{network.host}/24", "dev", outside],
            ["ip", "link", "set", outside, "up"],
            [*inns, "ip", "addr", "add", f"{network.peer}/24", "dev", inside],
            [*inns, "ip", "link", "set", inside, "up"],
            [*inns, "ip", "link", "set", "lo", "up"],
            [*inns, "ip", "route", "add", "default", "via", network.host],
        ]
        for step in steps:
            if subprocess.run(step, capture_output=True).returncode != 0:
                network.remove()
                return None
        network.name_addresses()
        return network

    def name_addresses(self) -> None:
        """Name both addresses in the namespace's own ``/etc/hosts`` (which ``ip netns
        exec`` puts over ``/etc/hosts``): Spark looks up the name of its local address
        at start, and the namespace reaches no DNS server (each lookup would wait for
        its timeouts, about 10 s per JVM)."""
        folder = Path("/etc/netns") / self.namespace
        folder.mkdir(parents=True, exist_ok=True)
        with open("/etc/hosts", encoding="utf-8") as system:
            hosts = system.read()
        names = f"{self.host} {self.namespace}-host\n{self.peer} {self.namespace}-peer\n"
        (folder / "hosts").write_text(f"{hosts.rstrip()}\n{names}", encoding="utf-8")

    def enter(self) -> list[str]:
        """The command prefix that runs a program in the namespace."""
        return ["ip", "netns", "exec", self.namespace]

    def remove(self) -> None:
        """Delete the namespace (and with it the veth pair)."""
        subprocess.run(["ip", "netns", "del", self.namespace], capture_output=True)
        shutil.rmtree(Path("/etc/netns") / self.namespace, ignore_errors=True)


@dataclass
class StandaloneCluster:
    """The running cluster (see the module docstring)."""

    master_url: str
    master: subprocess.Popen[bytes]
    workers: list[Worker]
    directory: Path
    shared: list[Path] = field(default_factory=list)
    #: The second worker's network, if it has one of its own.
    network: Network | None = None

    @property
    def host(self) -> str:
        """The address the master, the first worker, drivers and servers the executors
        use listen on (reachable from both workers)."""
        return self.network.host if self.network is not None else "127.0.0.1"

    def driver_environment(self) -> dict[str, str]:
        """What a driver's environment needs so executors reach it: its address."""
        return {"SPARK_LOCAL_IP": self.host}

    def restart(self, worker: Worker) -> None:
        """Start ``worker`` again (after :meth:`Worker.kill`) and wait until it has
        registered with the master again."""
        master_log = self.directory / "master.log"
        registered = master_log.read_text().count("Registering worker")
        worker.process = _spawn(worker.command, worker.log, worker.env)
        _wait_for(
            lambda: master_log.read_text().count("Registering worker") > registered,
            "the worker's registration",
            [master_log, worker.log],
        )

    def stop(self) -> None:
        """Kill every process (their groups) and remove the directories."""
        for process in [self.master, *(worker.process for worker in self.workers)]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        for worker in self.workers:
            shutil.rmtree(worker.work_dir, ignore_errors=True)
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.network is not None:
            self.network.remove()


def command_line(command: list[str]) -> str:
    return " ".join(shlex.quote(part) for part in command)


def installation_under_tmp() -> list[str]:
    """The directories of this installation (the Python environment, squall's sources,
    Spark) that are under ``/tmp``: a host has its own installation, so the isolated
    worker keeps seeing these."""
    import squall

    candidates = {sys.prefix, str(Path(squall.__file__).resolve().parents[1]), SPARK_HOME}
    inside = sorted(path for path in candidates if path.startswith("/tmp/"))
    # Keep the outermost ones only (a venv inside the checkout goes with it).
    return [path for path in inside if not any(path.startswith(f"{o}/") for o in inside)]


def private_tmp_script(command: str, work_dir: Path) -> str:
    """Shell commands, run in a new mount namespace, that put a private tmpfs over
    ``/tmp`` (keeping the installation's directories under it, bound back at the same
    paths) and then run ``command``."""
    steps = []
    kept = installation_under_tmp()
    for number, path in enumerate(kept):
        hold = work_dir / f"installation-{number}"
        steps.append(f"mkdir -p {hold} && mount --bind {shlex.quote(path)} {hold}")
    steps.append("mount -t tmpfs squall-private-tmp /tmp")
    for number, path in enumerate(kept):
        hold = work_dir / f"installation-{number}"
        steps.append(f"mkdir -p {shlex.quote(path)} && mount --bind {hold} {shlex.quote(path)}")
    steps.append(f"exec {command}")
    return " && ".join(steps)


def _spawn(
    command: list[str], log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    with open(log, "wb") as output:
        return subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, "SPARK_HOME": SPARK_HOME, **(env or {})},
            start_new_session=True,
        )


def _wait_for(condition: object, what: str, logs: list[Path], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {log}\n{log.read_text()[-2000:]}" for log in logs)
            raise Unavailable(f"{what} did not happen within {timeout:g} s\n{tails}")
        time.sleep(0.2)


def start_cluster() -> StandaloneCluster:
    """Start a master and two workers (the second with a private ``/tmp``); return once
    both workers have registered.

    Raises:
        Unavailable: not root, no ``unshare``, or the cluster did not come up.
    """
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise Unavailable("a worker with a private /tmp needs root and unshare")
    directory = Path(tempfile.mkdtemp(prefix="squall-standalone-"))
    network = Network.make()
    host = network.host if network is not None else "127.0.0.1"
    port = free_port()
    master_url = f"spark://{host}:{port}"
    master_log = directory / "master.log"
    master_args = ["--host", host, "--port", str(port), "--webui-port", str(free_port())]
    master_class = "org.apache.spark.deploy.master.Master"
    master = _spawn([SPARK_CLASS, master_class, *master_args], master_log)
    workers: list[Worker] = []
    cluster = StandaloneCluster(master_url, master, workers, directory, network=network)
    try:
        worker_args = ["org.apache.spark.deploy.worker.Worker", "--cores", "1", "--memory", "1g"]
        logs = [master_log]
        for number, isolated in enumerate((False, True), start=1):
            # Outside /tmp, which the isolated worker cannot see.
            work_dir = Path(tempfile.mkdtemp(prefix=f"squall-worker{number}-", dir="/var/tmp"))
            address = network.peer if isolated and network is not None else host
            args = [*worker_args, "--host", address, "--webui-port", str(free_port())]
            command = [SPARK_CLASS, *args, "--work-dir", str(work_dir), master_url]
            env = {"SPARK_LOCAL_IP": address}
            if isolated:
                script = private_tmp_script(command_line(command), work_dir)
                command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
                if network is not None:
                    command = [*network.enter(), *command]
            if network is None:
                # Executors on one host read each other's shuffle files from disk: their
                # scratch space must be where the other worker sees it, as on one host.
                scratch = work_dir / "scratch"
                scratch.mkdir()
                env["SPARK_LOCAL_DIRS"] = str(scratch)
            log = directory / f"worker{number}.log"
            logs.append(log)
            process = _spawn(command, log, env)
            workers.append(Worker(process, work_dir, isolated, command, log, env))
        _wait_for(
            lambda: master_log.read_text().count("Registering worker") >= 2,
            "the registration of two workers",
            logs,
        )
    except BaseException:
        cluster.stop()
        raise
    return cluster

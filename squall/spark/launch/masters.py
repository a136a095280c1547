"""Checking a Spark master URL before a JVM is started for it.

Spark takes about a minute, and hundreds of lines of Java traces, to give up on a
standalone master it cannot reach. What can be checked from Python in a few seconds is
checked here, before the JVM starts: the form of ``local`` and ``spark://`` URLs, that
a ``spark://`` master's host name resolves and that something accepts connections on
its port. Other masters (``yarn``, ``k8s://...``, a cluster manager's own scheme) are
left to Spark: they need configuration that only Spark reads.
"""

from __future__ import annotations

import re
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

from squall.spark.errors import SparkUnavailableError

#: Seconds a probe waits for a host name to resolve, and then for a TCP connection.
PROBE_TIMEOUT_SECS = 3.0

_LOCAL = re.compile(r"local(\[([0-9]+|\*)\]|\[([0-9]+|\*)\s*,\s*([0-9]+)\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\]")
_LOCAL_FORMS = "local, local[N], local[*], local[N, F] or local-cluster[N, C, M]"


def check_master(master: str, timeout_secs: float = PROBE_TIMEOUT_SECS) -> None:
    """Check ``master`` as far as Python can, without starting Spark.

    Runs on the caller's thread; takes at most about ``2 * timeout_secs`` per host of a
    ``spark://`` URL (resolution, then connection), nothing for other URLs.

    Raises:
        SparkUnavailableError: ``master`` is malformed (a ``local`` or ``spark://`` URL
            Spark would reject), or no master of a ``spark://`` URL can be reached (its
            host is unknown, nothing listens on its port, or it does not answer). The
            message names the URL and the cause.
    """
    if not master.strip():
        raise SparkUnavailableError("the Spark master URL is empty")
    if master.startswith("local"):
        _check_local(master)
    elif master.startswith("spark:"):
        addresses = spark_addresses(master)
        causes = [probe(host, port, timeout_secs) for host, port in addresses]
        if all(causes):
            if len(causes) == 1:
                raise SparkUnavailableError(f"cannot reach the Spark master {master}: {causes[0]}")
            pairs = zip(addresses, causes, strict=True)
            listed = "; ".join(f"{host}:{port}: {cause}" for (host, port), cause in pairs)
            raise SparkUnavailableError(f"cannot reach any Spark master of {master}: {listed}")


def _check_local(master: str) -> None:
    if _LOCAL_CLUSTER.fullmatch(master):
        return
    match = _LOCAL.fullmatch(master)
    if match is None:
        raise SparkUnavailableError(
            f"invalid Spark master URL {master!r}: a local master is written {_LOCAL_FORMS}"
        )
    threads = match.group(2) or match.group(3)
    if threads == "0":
        raise SparkUnavailableError(
            f"invalid Spark master URL {master!r}: a local master needs at least one thread"
        )


def spark_addresses(master: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` of each master of a standalone URL, ``spark://H:P[,H:P...]``.

    Raises:
        SparkUnavailableError: the URL is not of that form.
    """
    expected = f"invalid Spark master URL {master!r}: expected spark://HOST:PORT"
    if not master.startswith("spark://"):
        raise SparkUnavailableError(expected)
    addresses = []
    for part in master[len("spark://") :].split(","):
        try:
            parsed = urlsplit(f"spark://{part}")
            port = parsed.port
        except ValueError:
            raise SparkUnavailableError(expected) from None
        host = parsed.hostname
        if not host or port is None or parsed.path or parsed.query or parsed.username:
            raise SparkUnavailableError(expected)
        addresses.append((host, port))
    return addresses


def probe(host: str, port: int, timeout_secs: float = PROBE_TIMEOUT_SECS) -> str:
    """Why ``host:port`` cannot be connected to over TCP, or ``""`` if it can.

    Runs on the caller's thread (resolution on a helper thread, so that a slow resolver
    is given up after ``timeout_secs``); the connection is closed at once.
    """
    resolved: list[list[tuple[int, tuple[Any, ...]]]] = []
    failure: list[BaseException] = []

    def resolve() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            resolved.append([(info[0], info[4]) for info in infos])
        except OSError as exc:
            failure.append(exc)

    resolver = threading.Thread(target=resolve, name="spark-master-resolve", daemon=True)
    resolver.start()
    resolver.join(timeout_secs)
    if failure:
        if isinstance(failure[0], socket.gaierror):
            return f"unknown host {host!r}"
        return f"cannot resolve {host!r}: {failure[0]}"
    if not resolved:
        return f"host {host!r} not resolved within {timeout_secs:g} s"
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    cause = f"{host!r} has no address"
    for family, address in resolved[0]:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as connection:
                connection.settimeout(timeout_secs)
                connection.connect(address)
            return ""
        except ConnectionRefusedError:
            cause = f"connection refused by {where} (no Spark master listens there)"
        except TimeoutError:
            cause = f"no answer from {where} within {timeout_secs:g} s"
        except OSError as exc:
            cause = f"cannot connect to {where}: {exc.strerror or exc}"
    return cause

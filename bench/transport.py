"""Moving tuple batches between two processes: which local transport and serializer.

A producer process sends word-count-shaped tuples (``[task id, [word, count]]``
entries, as a worker would send to another worker's tasks) in batches to a consumer
process, which decodes every batch and counts its tuples. Each combination of
transport and serializer runs at several batch sizes; the figure is the cost per tuple
in microseconds (wall time from the first send to the consumer's last decode, divided
by the tuples), the median of ``--runs`` runs. The transports:

* ``pipe``: ``multiprocessing.Pipe(duplex=False)``, ``send_bytes``/``recv_bytes``
  (an OS pipe with length framing);
* ``socketpair``: a Unix stream socket pair with 4-byte length framing.

The serializers: ``pickle`` protocol 5; ``msgpack`` (``use_bin_type``: a tuple arrives
as a list); and ``msgpack-exact``, squall's own codec for worker processes
(``squall.local.codec``: msgpack, with every value arriving as the type it was sent
as).

    python bench/transport.py --json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import pickle
import socket
import statistics
import struct
import time
from collections.abc import Callable
from typing import Any

import msgpack

from squall.local import codec

WORDS = ["the", "cow", "jumped", "over", "moon", "man", "went", "to", "store", "candy"]
HEADER = struct.Struct("!I")


def encoders(name: str) -> tuple[Callable[[Any], bytes], Callable[[bytes], Any]]:
    if name == "pickle":
        return (lambda value: pickle.dumps(value, protocol=5)), pickle.loads
    if name == "msgpack-exact":
        return codec.encode, codec.decode
    packer = msgpack.Packer(use_bin_type=True)
    return packer.pack, (lambda data: msgpack.unpackb(data, raw=False))


def batches(size: int, tuples: int) -> list[list[Any]]:
    rows = [[7 + i % 4, [WORDS[i % len(WORDS)], i]] for i in range(size)]
    return [rows] * (tuples // size)


def consume_pipe(reader: Any, serializer: str, done: Any) -> None:
    _, decode = encoders(serializer)
    count = 0
    while True:
        data = reader.recv_bytes()
        if not data:
            break
        count += len(decode(data))
    done.send(count)


def consume_socket(sock: socket.socket, serializer: str, done: Any) -> None:
    _, decode = encoders(serializer)
    stream = sock.makefile("rb")
    count = 0
    while True:
        head = stream.read(HEADER.size)
        (length,) = HEADER.unpack(head)
        if length == 0:
            break
        count += len(decode(stream.read(length)))
    done.send(count)


def run_once(transport: str, serializer: str, size: int, tuples: int) -> float:
    """Microseconds per tuple for one run."""
    encode, _ = encoders(serializer)
    payload = batches(size, tuples)
    done_recv, done_send = multiprocessing.Pipe(duplex=False)
    if transport == "pipe":
        reader, writer = multiprocessing.Pipe(duplex=False)
        consumer = multiprocessing.Process(
            target=consume_pipe, args=(reader, serializer, done_send)
        )
        consumer.start()
        started = time.perf_counter()
        for batch in payload:
            writer.send_bytes(encode(batch))
        writer.send_bytes(b"")
    else:
        left, right = socket.socketpair()
        consumer = multiprocessing.Process(
            target=consume_socket, args=(right, serializer, done_send)
        )
        consumer.start()
        started = time.perf_counter()
        for batch in payload:
            data = encode(batch)
            left.sendall(HEADER.pack(len(data)) + data)
        left.sendall(HEADER.pack(0))
    received = done_recv.recv()
    elapsed = time.perf_counter() - started
    consumer.join()
    assert received == size * len(payload), (received, size * len(payload))
    return elapsed * 1e6 / received


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tuples", type=int, default=200_000)
    parser.add_argument("--sizes", default="1,100,1000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    multiprocessing.set_start_method("fork")
    encode, decode = encoders("msgpack-exact")
    sample = [3, ("a", 1), {1: b"x", "k": [None, True, 2.5]}, frozenset({1}), 2**70]
    assert decode(encode(sample)) == sample, "msgpack-exact must keep every value's type"
    assert type(decode(encode(sample))[1]) is tuple
    results: dict[str, dict[str, float]] = {}
    for transport in ("pipe", "socketpair"):
        for serializer in ("pickle", "msgpack", "msgpack-exact"):
            key = f"{transport}+{serializer}"
            results[key] = {}
            for size in (int(s) for s in args.sizes.split(",")):
                tuples = args.tuples if size > 1 else args.tuples // 10
                runs = [run_once(transport, serializer, size, tuples) for _ in range(args.runs)]
                results[key][str(size)] = round(statistics.median(runs), 3)
    if args.json:
        print(json.dumps({"us_per_tuple": results, "runs": args.runs}))
        return
    for key, figures in results.items():
        line = ", ".join(f"batch {size}: {us:.3f} us" for size, us in figures.items())
        print(f"{key:20} {line}")


if __name__ == "__main__":
    main()

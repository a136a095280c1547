"""SharedRecord: one record for every copy of a component, in memory while it is never
pickled, in files shared by every process once it is."""

from __future__ import annotations

import copy
import multiprocessing
import os
import pickle
import threading

import pytest

from squall.testing import SharedRecord


def append_in_child(record: SharedRecord, tag: str, count: int) -> None:
    """Runs in a spawned process: ``record`` arrives pickled."""
    for i in range(count):
        record.append("items", (tag, i))
    record.append(f"done-{tag}", os.getpid())


def run_children(record: SharedRecord, tags: list[str], count: int) -> None:
    context = multiprocessing.get_context("spawn")
    children = [context.Process(target=append_in_child, args=(record, tag, count)) for tag in tags]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0


def test_a_record_never_pickled_stays_in_memory_and_is_shared_by_copies() -> None:
    record = SharedRecord()
    copies = [copy.deepcopy(record), copy.copy(record), copy.deepcopy({"r": record})["r"]]

    for i, each in enumerate(copies):
        each.append("n", i)

    assert all(each is record for each in copies)
    assert record.directory is None
    assert record.get("n") == [0, 1, 2]
    assert record.get("missing") == []
    got = record.get("n")
    got.append(99)  # a copy of the list
    assert record.get("n") == [0, 1, 2]


def test_threads_appending_lose_nothing_and_keep_their_order() -> None:
    for pickled in (False, True):
        record = SharedRecord()
        if pickled:
            pickle.dumps(record)

        def work(tag: int, record: SharedRecord = record) -> None:
            for i in range(100):
                record.append("items", (tag, i))

        threads = [threading.Thread(target=work, args=(tag,)) for tag in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        items = record.get("items")
        assert len(items) == 400
        for tag in range(4):
            assert [i for t, i in items if t == tag] == list(range(100))


def test_appends_of_child_processes_are_seen_by_the_parent_in_order() -> None:
    record = SharedRecord()
    record.append("items", ("parent", 0))  # before pickling: moved to the files, first

    run_children(record, ["a", "b", "c"], 50)
    record.append("items", ("parent", 1))

    items = record.get("items")
    assert items[0] == ("parent", 0) and items[-1] == ("parent", 1)
    assert len(items) == 2 + 3 * 50
    for tag in "abc":  # each process's appends, whole and in its order
        assert [i for t, i in items if t == tag] == list(range(50))
        (pid,) = record.get(f"done-{tag}")
        assert pid != os.getpid()
    assert record.directory is not None
    assert os.path.basename(record.directory).startswith("squall-record-")


def test_pickling_is_idempotent_and_every_copy_shares_the_files() -> None:
    record = SharedRecord()
    record.append("x", 1)
    first = pickle.loads(pickle.dumps(record))
    second = pickle.loads(pickle.dumps(record))
    third = pickle.loads(pickle.dumps(first))

    assert first is not record
    assert record.directory == first.directory == second.directory == third.directory
    first.append("x", 2)
    copy.deepcopy(second).append("x", 3)  # a deep copy of an unpickled copy is that copy
    third.append("x", 4)
    record.append("x", 5)

    for each in (record, first, second, third):
        assert each.get("x") == [1, 2, 3, 4, 5]
    assert copy.deepcopy(first) is first


def test_items_and_names_round_trip() -> None:
    record = SharedRecord()
    pickle.dumps(record)
    names = ["plain", "with/slash", "", "ünïcode ✓", "x" * 1000]
    for name in names:
        record.append(name, {"name": name, "values": [1, (2, 3)], "none": None})

    for name in names:
        assert record.get(name) == [{"name": name, "values": [1, (2, 3)], "none": None}]


def test_clear_empties_memory_and_files() -> None:
    record = SharedRecord()
    record.append("a", 1)
    record.queue.append("queued")
    record.clear()
    assert record.get("a") == [] and not record.queue

    record.append("a", 2)
    copy_ = pickle.loads(pickle.dumps(record))
    copy_.append("b", 3)
    run_children(record, ["child"], 2)
    assert record.get("a") == [2]
    assert record.get("items") == [("child", 0), ("child", 1)]

    copy_.clear()  # clearing any copy clears every copy's lists

    for each in (record, copy_):
        assert each.get("a") == [] and each.get("b") == [] and each.get("items") == []
    record.append("a", 4)
    assert copy_.get("a") == [4]


def test_the_queue_is_process_local() -> None:
    record = SharedRecord()
    record.queue.append("x")
    copy_ = pickle.loads(pickle.dumps(record))

    assert list(record.queue) == ["x"]
    assert not copy_.queue
    assert copy.deepcopy(record).queue is record.queue


def take_in_child(record: SharedRecord, tag: str) -> None:
    """Runs in a spawned process: takes from the shared queue until it is empty."""
    while True:
        try:
            item = record.take()
        except IndexError:
            return
        record.append("taken", (tag, item))


def test_the_shared_queue_is_taken_once_by_any_copy_in_any_process() -> None:
    record = SharedRecord()
    record.put("fed before")  # in memory: moves to the files with the record
    record.queue.append("process-local")
    copy_ = pickle.loads(pickle.dumps(record))
    assert list(record.queue) == ["process-local"] and not copy_.queue
    for n in range(200):
        record.put(n)
    assert record.queued() == copy_.queued() == 201
    assert copy_.take() == "fed before"

    context = multiprocessing.get_context("spawn")
    children = [context.Process(target=take_in_child, args=(record, t)) for t in "ab"]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    taken = record.get("taken")
    assert sorted(item for _, item in taken) == list(range(200))  # each once
    for tag in "ab":  # each child took in the order put
        mine = [item for who, item in taken if who == tag]
        assert mine == sorted(mine)
    assert record.queued() == 0
    with pytest.raises(IndexError):
        record.take()

    record.put("again")
    record.clear()
    assert copy_.queued() == 0
    record.put("after clear")
    assert copy_.take() == "after clear"


def test_the_shared_queue_in_memory_is_a_queue() -> None:
    record = SharedRecord()
    record.put(1)
    copy.deepcopy(record).put(2)
    assert record.queued() == 2
    assert [record.take(), record.take()] == [1, 2]
    with pytest.raises(IndexError):
        record.take()

"""The set-up of Spark's Python processes: the start-up heap is frozen once, and
garbage made afterwards is still collected."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_prepare_process_freezes_the_start_up_heap_once_and_later_cycles_are_collected() -> None:
    script = textwrap.dedent(
        """
        import gc
        from squall.spark.launch.processsetup import prepare_process

        assert gc.get_freeze_count() == 0
        prepare_process()
        frozen = gc.get_freeze_count()
        assert frozen > 1000, frozen  # the imported modules' objects
        prepare_process()
        assert gc.get_freeze_count() == frozen  # once per process

        class Node:
            pass

        node = Node()
        node.self = node
        del node
        assert gc.collect() >= 1  # a cycle made after the freeze is still collected
        print("ok", frozen)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")

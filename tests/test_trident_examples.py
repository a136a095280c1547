"""The Trident examples (examples/trident_word_count.py and examples/trident_reach.py) run
on LocalCluster and answer their DRPC queries exactly; the expected answers are computed
here independently from the examples' data."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from squall import LocalCluster, StormTopology
from squall.drpc import LocalDRPC
from tests.helpers import wait_until

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` as module ``example_<name>``."""
    module_name = f"example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def query(drpc: LocalDRPC, function: str, args: str) -> list[list[int]]:
    return json.loads(drpc.execute(function, args))


def test_word_count_answers_summed_counts_of_the_query_words() -> None:
    example = load("trident_word_count")
    counts = Counter(word for sentence in example.SENTENCES for word in sentence.split())
    everything = " ".join(sorted(counts))

    with LocalDRPC(timeout_secs=10.0) as drpc, LocalCluster() as cluster:
        cluster.submit_topology("wc", example.CONF, example.build_topology(drpc))
        wait_until(lambda: query(drpc, "words", everything) == [[sum(counts.values())]])
        answers = {
            args: query(drpc, "words", args)
            for args in ["cow four", "the", "to be", "the the", "nothing here", "", *counts]
        }
        cluster.kill_topology("wc")

    assert answers["cow four"] == [[2]]  # the API contract's example
    for args, answer in answers.items():
        assert answer == [[sum(counts[word] for word in args.split())]], args
    assert answers["the"] == [[5]] and answers["the the"] == [[10]]
    assert answers["nothing here"] == [[0]] and answers[""] == [[0]]


def test_word_count_with_cycling_sentences_keeps_counting() -> None:
    example = load("trident_word_count")
    sentences = ["a b", "b c"]

    with LocalDRPC(timeout_secs=10.0) as drpc, LocalCluster() as cluster:
        cluster.submit_topology(
            "wc", example.CONF, example.build_topology(drpc, sentences, cycle=True)
        )
        wait_until(lambda: query(drpc, "words", "a")[0][0] >= 5)
        ((a,),), ((b,),), ((c,),) = (query(drpc, "words", w) for w in "abc")
        ((total,),) = query(drpc, "words", "a b c")
        cluster.kill_topology("wc")

    # A batch never runs over the end of the sentences, so every batch holds both
    # sentences: b counts two per batch. The state moves on between the queries.
    assert a >= 5 and b % 2 == 0 and b >= 2 * a and 2 * c >= b
    assert total >= a + b + c


def reach_of(url: str, module: ModuleType) -> int:
    """Distinct followers of the URL's tweeters, from the example's data."""
    followers: set[str] = set()
    for tweeter in module.TWEETERS_DB.get(url, []):
        followers.update(module.FOLLOWERS_DB.get(tweeter, []))
    return len(followers)


def test_reach_counts_distinct_followers_of_the_tweeters() -> None:
    example = load("trident_reach")
    urls = [*example.TWEETERS_DB, "unknown.org"]

    with LocalDRPC(timeout_secs=10.0) as drpc, LocalCluster() as cluster:
        cluster.submit_topology("reach", example.CONF, example.build_topology(drpc))
        answers = {url: query(drpc, "reach", url) for url in urls}
        cluster.kill_topology("reach")

    assert answers == {url: [[reach_of(url, example)]] for url in urls}
    assert answers["foo.com/blog/1"] == [[16]]  # Storm's TridentReach answers
    assert answers["engineering.twitter.com/blog/5"] == [[14]]
    assert answers["unknown.org"] == [[0]]


def test_reach_with_other_data() -> None:
    example = load("trident_reach")
    tweeters = {"u1": ["x", "y", "z"], "u2": ["nobody"], "u3": []}
    followers = {"x": ["a", "b"], "y": ["b", "c", "x"], "z": ["a"], "w": ["q"]}

    with LocalDRPC(timeout_secs=10.0) as drpc, LocalCluster() as cluster:
        cluster.submit_topology(
            "reach", example.CONF, example.build_topology(drpc, tweeters, followers)
        )
        answers = {url: query(drpc, "reach", url) for url in ["u1", "u2", "u3", "u4"]}
        cluster.kill_topology("reach")

    assert answers == {"u1": [[4]], "u2": [[0]], "u3": [[0]], "u4": [[0]]}


@pytest.mark.parametrize("name", ["trident_word_count", "trident_reach"])
def test_examples_build_deep_copyable_topologies_and_run_as_scripts(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load(name)
    assert example.__doc__
    topology = example.build_topology()
    assert isinstance(topology, StormTopology)
    for spec in topology:
        copy.deepcopy(spec.component)

    example.main()

    printed = capsys.readouterr().out
    if name == "trident_word_count":
        assert "'cow four': [[2]]" in printed
    else:
        assert "reach of foo.com/blog/1: [[16]]" in printed

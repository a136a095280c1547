"""``JoinBolt``: Storm's windowed join (``org.apache.storm.bolt.JoinBolt``).

Three parts:

* The join of one window, the bolt run by hand on windows of tuples (as Storm's
  ``TestJoinBolt`` does, with its users, orders, stores and cities): inner and left
  joins of two and three sources, by source and by stream, nested keys, select naming,
  anchoring. The expected rows are written out from the data by hand.
* Build-time errors: ``create_topology()`` names the bolt and the problem.
* Topologies: count windows (both engines), event-time windows and acking,
  anchoring to the joined tuples only (LocalCluster).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from squall import (
    Count,
    Duration,
    Fields,
    InvalidTopologyError,
    JoinBolt,
    LocalCluster,
    ManualClock,
    TopologyBuilder,
    TupleWindow,
)
from squall.model.tuple import StreamInfo, Tuple
from squall.testing import CapturingBolt, FeederSpout, FixedTupleSpout
from tests.conftest import Engine, on_engines
from tests.helpers import wait_until

USER_FIELDS = ["userId", "name", "city"]
USERS = [
    [1, "roshan", "san jose"],
    [2, "harsha", "santa clara"],
    [3, "siva", "dublin"],
    [4, "hugo", "san mateo"],
    [5, "suresh", "sunnyvale"],
    [6, "guru", "palo alto"],
    [7, "arun", "bengaluru"],
    [8, "satish", "mumbai"],
    [9, "mani", "bengaluru"],
    [10, "priyank", "seattle"],
]
ORDER_FIELDS = ["orderId", "userId", "itemId", "price"]
ORDERS = [
    [11, 2, 21, 7],
    [12, 2, 22, 3],
    [13, 3, 23, 4],
    [14, 4, 24, 5],
    [15, 5, 25, 2],
    [16, 6, 26, 7],
    [17, 6, 27, 4],
    [18, 7, 28, 2],
    [19, 8, 29, 9],
]
STORE_FIELDS = ["storeId", "storeName", "city"]
STORES = [
    [1, "store1", "san jose"],
    [2, "store2", "santa clara"],
    [3, "store3", "dublin"],
    [4, "store4", "san mateo"],
    [5, "store5", "bengaluru"],
]
CITY_FIELDS = ["cityId", "cityName", "country"]
CITIES = [
    [1, "san jose", "US"],
    [2, "santa clara", "US"],
    [3, "dublin", "US"],
    [4, "san mateo", "US"],
    [5, "sunnyvale", "US"],
    [6, "palo alto", "US"],
    [7, "bengaluru", "India"],
    [8, "mumbai", "India"],
    [9, "chennai", "India"],
]

#: Each user's orders' prices, in order (by hand from ORDERS).
PRICES = {2: [7, 3], 3: [4], 4: [5], 5: [2], 6: [7, 4], 7: [2], 8: [9]}


def stream(
    name: str, fields: Sequence[str], rows: Sequence[Sequence[Any]], source: str
) -> list[Tuple]:
    """Tuples of ``rows`` on stream ``name`` of component ``source``."""
    info = StreamInfo(source, name, Fields(fields))
    return [Tuple(list(row), info, 0) for row in rows]


class Emits:
    """A collector recording ``(values, anchors, stream)`` of each emit."""

    def __init__(self) -> None:
        self.emits: list[tuple[list[Any], list[Tuple], str]] = []

    def emit(
        self, values: Sequence[Any], anchors: Any = None, stream: str = "default"
    ) -> list[int]:
        self.emits.append((list(values), list(anchors), stream))
        return []

    @property
    def rows(self) -> list[list[Any]]:
        return [values for values, _, _ in self.emits]


def run(bolt: JoinBolt, *streams: list[Tuple]) -> Emits:
    """Prepare ``bolt`` and execute it on one window of ``streams``, concatenated."""
    collector = Emits()
    bolt.prepare({}, None, collector)  # type: ignore[arg-type]
    bolt.execute(TupleWindow([t for s in streams for t in s], None, []))
    return collector


def users(source: str = "usersSpout") -> list[Tuple]:
    return stream("users", USER_FIELDS, USERS, source)


def orders(source: str = "ordersSpout") -> list[Tuple]:
    return stream("orders", ORDER_FIELDS, ORDERS, source)


def stores() -> list[Tuple]:
    return stream("stores", STORE_FIELDS, STORES, "storesSpout")


def cities() -> list[Tuple]:
    return stream("cities", CITY_FIELDS, CITIES, "citiesSpout")


# --- the join of one window ------------------------------------------------------------


def test_one_source_projects_each_tuple() -> None:
    bolt = JoinBolt(JoinBolt.Selector.STREAM, "orders", "orderId").select(
        "orderId,userId,itemId,price"
    )
    assert run(bolt, orders()).rows == ORDERS


def test_inner_join_of_two_streams_in_storm_order() -> None:
    """Users are the base, in window order; each user's orders follow in window order
    (the window holds the orders first)."""
    bolt = (
        JoinBolt(JoinBolt.Selector.STREAM, "users", "userId")
        .join("orders", "userId", "users")
        .select("userId,name,price")
    )
    expected = [[u[0], u[1], price] for u in USERS for price in PRICES.get(u[0], [])]
    assert len(expected) == len(ORDERS)
    assert run(bolt, orders(), users()).rows == expected


def test_left_join_of_two_streams_fills_the_missing_side_with_none() -> None:
    bolt = (
        JoinBolt("users", "userId", selector="stream")
        .left_join("orders", "userId", "users")
        .select("userId,name,price")
    )
    expected = [[u[0], u[1], price] for u in USERS for price in PRICES.get(u[0], [None])]
    assert [row for row in expected if row[2] is None] == [
        [1, "roshan", None],
        [9, "mani", None],
        [10, "priyank", None],
    ]
    assert run(bolt, orders(), users()).rows == expected


def test_join_by_source_component() -> None:
    """The default selector names components: both streams are "default" here."""
    users_tuples = stream("default", USER_FIELDS, USERS, "usersSpout")
    orders_tuples = stream("default", ORDER_FIELDS, ORDERS, "ordersSpout")
    bolt = JoinBolt("usersSpout", "userId").join("ordersSpout", "userId", "usersSpout")
    bolt.select("name,ordersSpout:orderId")
    assert run(bolt, users_tuples, orders_tuples).rows == [
        ["harsha", 11],
        ["harsha", 12],
        ["siva", 13],
        ["hugo", 14],
        ["suresh", 15],
        ["guru", 16],
        ["guru", 17],
        ["arun", 18],
        ["satish", 19],
    ]


def test_qualified_fields_pick_their_source() -> None:
    """``users:city`` and ``stores:city``: each from its own source."""
    bolt = (
        JoinBolt(JoinBolt.Selector.STREAM, "users", "city")
        .join("stores", "city", "users")
        .select("userId,name,storeName,users:city,stores:city")
    )
    assert run(bolt, stores(), users()).rows == [
        [1, "roshan", "store1", "san jose", "san jose"],
        [2, "harsha", "store2", "santa clara", "santa clara"],
        [3, "siva", "store3", "dublin", "dublin"],
        [4, "hugo", "store4", "san mateo", "san mateo"],
        [7, "arun", "store5", "bengaluru", "bengaluru"],
        [9, "mani", "store5", "bengaluru", "bengaluru"],
    ]


#: The users with a store in their city, with the store and the city's country.
WITH_STORES = [
    ["roshan", "store1", "san jose", "US"],
    ["harsha", "store2", "santa clara", "US"],
    ["siva", "store3", "dublin", "US"],
    ["hugo", "store4", "san mateo", "US"],
    ["arun", "store5", "bengaluru", "India"],
    ["mani", "store5", "bengaluru", "India"],
]


def test_three_stream_inner_join() -> None:
    bolt = (
        JoinBolt(JoinBolt.Selector.STREAM, "users", "city")
        .join("stores", "city", "users")
        .join("cities", "cityName", "stores")
        .select("name,storeName,city,country")
    )
    assert run(bolt, users(), stores(), cities()).rows == WITH_STORES


def test_three_stream_left_joins_on_the_base() -> None:
    """Both left joins match on the users' city: every user is kept."""
    bolt = (
        JoinBolt(JoinBolt.Selector.STREAM, "users", "city")
        .left_join("stores", "city", "users")
        .left_join("cities", "cityName", "users")
        .select("name,storeName,city,country")
    )
    assert run(bolt, users(), cities(), stores()).rows == [
        ["roshan", "store1", "san jose", "US"],
        ["harsha", "store2", "santa clara", "US"],
        ["siva", "store3", "dublin", "US"],
        ["hugo", "store4", "san mateo", "US"],
        ["suresh", None, "sunnyvale", "US"],
        ["guru", None, "palo alto", "US"],
        ["arun", "store5", "bengaluru", "India"],
        ["satish", None, "mumbai", "India"],
        ["mani", "store5", "bengaluru", "India"],
        ["priyank", None, "seattle", None],
    ]


def test_a_left_join_on_a_missing_side_drops_the_record_as_storm_does() -> None:
    """Cities join the stores' city: a user without a store has no key for it, and
    Storm drops such a record even in a left join."""
    bolt = (
        JoinBolt(JoinBolt.Selector.STREAM, "users", "city")
        .left_join("stores", "city", "users")
        .left_join("cities", "cityName", "stores")
        .select("name,storeName,city,country")
    )
    assert run(bolt, users(), cities(), stores()).rows == WITH_STORES


def test_three_stream_mixed_join() -> None:
    bolt = (
        JoinBolt(JoinBolt.Selector.STREAM, "users", "city")
        .join("stores", "city", "users")
        .left_join("cities", "cityName", "users")
        .select("name,storeName,city,country")
    )
    assert run(bolt, users(), cities(), stores()).rows == WITH_STORES


def test_nested_keys_are_looked_up_in_mappings() -> None:
    info = StreamInfo("usersSpout", "users", Fields("outer"))
    nested = [Tuple([dict(zip(USER_FIELDS, row, strict=True))], info, 0) for row in USERS]
    bolt = JoinBolt(JoinBolt.Selector.STREAM, "users", "outer.userId").select(
        "outer.name, outer.city"
    )
    collector = run(bolt, nested)
    assert collector.rows == [[name, city] for _, name, city in USERS]
    declared = bolt.plan().output_names
    assert declared == ["outer.name", "outer.city"]


def test_a_nested_key_in_a_value_that_is_not_a_mapping_is_a_clear_error() -> None:
    bolt = (
        JoinBolt(JoinBolt.Selector.STREAM, "users", "name.first")
        .join("orders", "userId", "users")
        .select("userId")
    )
    with pytest.raises(
        ValueError,
        match="'name' of a tuple from 'usersSpout' stream 'users' is a str, not a mapping",
    ):
        run(bolt, users(), orders())


def test_each_result_is_anchored_to_the_tuples_it_joins() -> None:
    bolt = (
        JoinBolt(JoinBolt.Selector.STREAM, "users", "city")
        .left_join("stores", "city", "users")
        .select("name,storeName")
        .with_output_stream("joined")
    )
    user_tuples, store_tuples = users(), stores()
    collector = run(bolt, user_tuples, store_tuples)
    assert collector.emits[0] == (["roshan", "store1"], [user_tuples[0], store_tuples[0]], "joined")
    assert collector.emits[4] == (["suresh", None], [user_tuples[4]], "joined")
    assert all(stream_id == "joined" for _, _, stream_id in collector.emits)


def test_a_tuple_from_a_source_outside_the_join_is_a_clear_error() -> None:
    """create_topology() refuses such a subscription; a bolt run by hand says it too."""
    bolt = JoinBolt(JoinBolt.Selector.STREAM, "users", "userId").select("name")
    with pytest.raises(
        ValueError,
        match="JoinBolt received a tuple from 'ordersSpout' stream 'orders', whose stream "
        "'orders' is not part of the join",
    ):
        run(bolt, users(), orders())


@pytest.mark.parametrize(
    "bolt",
    [
        JoinBolt(JoinBolt.Selector.STREAM, "users", "userId"),
        JoinBolt("users", "userId", JoinBolt.Selector.STREAM),
        JoinBolt("users", "userId", selector="stream"),
        JoinBolt("users", "userId", selector="STREAM"),
    ],
    ids=["storm-order", "selector-third", "string", "upper-case"],
)
def test_the_selector_as_storm_spells_it_or_as_a_string(bolt: JoinBolt) -> None:
    assert bolt.selector is JoinBolt.Selector.STREAM
    assert run(bolt.select("name"), users()).rows == [[row[1]] for row in USERS]


def test_output_fields_are_named_as_select_writes_them() -> None:
    builder = TopologyBuilder()
    builder.set_spout("genders", FixedTupleSpout([], ["id", "gender"]))
    builder.set_spout("ages", FixedTupleSpout([], ["id", "age"]))
    joiner = (
        JoinBolt("genders", "id")
        .join("ages", "id", "genders")
        .select(" genders:id, ages:id ,gender,:age")
        .with_tumbling_window(Count(2))
    )
    builder.set_bolt("joiner", joiner).fields_grouping("genders", Fields("id")).fields_grouping(
        "ages", Fields("id")
    )
    builder.set_bolt(
        "late",
        JoinBolt("genders", "id")
        .select("gender")
        .with_tumbling_window(Count(1))
        .with_output_stream("out"),
    ).shuffle_grouping("genders")
    topology = builder.create_topology()
    assert topology.get_component("joiner").streams["default"].fields.to_list() == [
        "genders:id",
        "ages:id",
        "gender",
        "age",
    ]
    assert list(topology.get_component("late").streams) == ["out"]


# --- build-time errors -------------------------------------------------------------------


def gender_age_builder(
    joiner: Any, subscribe: Sequence[str] = ("genders", "ages")
) -> TopologyBuilder:
    """Spouts ``genders`` (id, gender) and ``ages`` (id, age); ``joiner`` subscribed to
    ``subscribe``, fields-grouped on ``id``."""
    builder = TopologyBuilder()
    builder.set_spout("genders", FixedTupleSpout([], ["id", "gender"]))
    builder.set_spout("ages", FixedTupleSpout([], ["id", "age"]))
    declarer = builder.set_bolt("joiner", joiner)
    for source in subscribe:
        declarer.fields_grouping(source, Fields("id"))
    return builder


def genders_ages() -> JoinBolt:
    return JoinBolt("genders", "id").join("ages", "id", "genders")


BUILD_ERRORS = [
    (
        "no select",
        genders_ages(),
        ("genders", "ages"),
        "bolt 'joiner': JoinBolt has no output fields: call select(",
    ),
    (
        "no window",
        genders_ages().select("gender"),
        ("genders", "ages"),
        "bolt 'joiner': JoinBolt has no window: call with_window(...)",
    ),
    (
        "prior source not introduced",
        JoinBolt("genders", "id").join("ages", "id", "heights").select("age"),
        ("genders", "ages"),
        "bolt 'joiner': JoinBolt: component 'ages' joins 'heights', which is not introduced "
        "before it (the sources so far: ['genders'])",
    ),
    (
        "source joined twice",
        genders_ages().join("ages", "id", "genders").select("age"),
        ("genders", "ages"),
        "bolt 'joiner': JoinBolt: component 'ages' is already part of the join",
    ),
    (
        "the base joined again",
        JoinBolt("genders", "id").left_join("genders", "id", "genders").select("gender"),
        ("genders",),
        "bolt 'joiner': JoinBolt: component 'genders' is already part of the join",
    ),
    (
        "qualified join field",
        JoinBolt("genders", "id").join("ages", "genders:id", "genders").select("age"),
        ("genders", "ages"),
        "join field 'genders:id' must not name a source",
    ),
    (
        "select of an unknown source",
        genders_ages().select("gender,heights:height"),
        ("genders", "ages"),
        "bolt 'joiner': JoinBolt: select names 'heights:height' of component 'heights', which "
        "is not part of the join (its sources: ['genders', 'ages'])",
    ),
    (
        "duplicate output names",
        genders_ages().select("id, gender, id"),
        ("genders", "ages"),
        "bolt 'joiner': JoinBolt: select names the output field 'id' twice",
    ),
    (
        "empty select name",
        genders_ages().select("gender,,age"),
        ("genders", "ages"),
        "bolt 'joiner': JoinBolt: select('gender,,age'): '' is not a field name",
    ),
    (
        "bad selector",
        JoinBolt("genders", "id", selector="field").select("gender"),
        ("genders",),
        "bolt 'joiner': JoinBolt: selector must be JoinBolt.Selector.SOURCE/STREAM or "
        "'source'/'stream', got 'field'",
    ),
    (
        "a joined source the bolt does not receive",
        genders_ages().select("gender"),
        ("genders",),
        "bolt 'joiner': JoinBolt joins component 'ages', but the bolt receives nothing from "
        "it (its inputs: 'genders' stream 'default')",
    ),
    (
        "an input that is not joined",
        JoinBolt("genders", "id").select("gender"),
        ("genders", "ages"),
        "bolt 'joiner': JoinBolt subscribes to 'ages' stream 'default', whose component "
        "'ages' is not part of the join (its sources: ['genders'])",
    ),
    (
        "join field not declared",
        JoinBolt("genders", "id").join("ages", "userId", "genders").select("age"),
        ("genders", "ages"),
        "bolt 'joiner': JoinBolt: join field 'userId' of component 'ages' is not a field of "
        "'ages' stream 'default' (its fields: ['id', 'age'])",
    ),
    (
        "qualified select field not declared by its source",
        genders_ages().select("ages:gender"),
        ("genders", "ages"),
        "bolt 'joiner': JoinBolt: selected field 'ages:gender' is not a field of component "
        "'ages''s inputs (their fields: ['age', 'id'])",
    ),
    (
        "select field declared by no input",
        genders_ages().select("gender,height"),
        ("genders", "ages"),
        "bolt 'joiner': JoinBolt: selected field 'height' is not a field of any input "
        "(their fields: ['age', 'gender', 'id'])",
    ),
]


@pytest.mark.parametrize(
    ("joiner", "subscribe", "message"),
    [
        pytest.param(joiner, subscribe, message, id=case)
        for case, joiner, subscribe, message in BUILD_ERRORS
    ],
)
def test_create_topology_names_the_bolt_and_the_problem(
    joiner: JoinBolt, subscribe: Sequence[str], message: str
) -> None:
    if joiner._window_length is None and "no window" not in message:
        joiner.with_tumbling_window(Count(2))
    builder = gender_age_builder(joiner, subscribe)
    with pytest.raises(InvalidTopologyError) as error:
        builder.create_topology()
    assert message in str(error.value)


def test_stream_selector_checks_the_streams_of_every_component() -> None:
    """By stream, the inputs of one stream may come from several components: each must
    declare the join field."""
    builder = TopologyBuilder()
    builder.set_spout("a", FeederSpout(["id", "name"], stream="people"))
    builder.set_spout("b", FeederSpout(["key", "name"], stream="people"))
    builder.set_spout("c", FeederSpout(["owner", "car"], stream="cars"))
    joiner = (
        JoinBolt(JoinBolt.Selector.STREAM, "people", "id")
        .join("cars", "owner", "people")
        .select("name,car")
        .with_tumbling_window(Count(3))
    )
    builder.set_bolt("joiner", joiner).shuffle_grouping("a", "people").shuffle_grouping(
        "b", "people"
    ).shuffle_grouping("c", "cars")
    with pytest.raises(InvalidTopologyError) as error:
        builder.create_topology()
    assert (
        "bolt 'joiner': JoinBolt: join field 'id' of stream 'people' is not a field of 'b' "
        "stream 'people' (its fields: ['key', 'name'])"
    ) in str(error.value)


# --- topologies ----------------------------------------------------------------------------


def users_orders_topology(sink: CapturingBolt) -> tuple[Any, FixedTupleSpout, FixedTupleSpout]:
    """Spouts ``users`` and ``orders`` (msg id: the row's index) -> ``joiner`` (users
    inner join orders, one tumbling window of all 19 tuples) -> ``sink``."""
    user_spout = FixedTupleSpout(USERS, USER_FIELDS)
    order_spout = FixedTupleSpout(ORDERS, ORDER_FIELDS)
    builder = TopologyBuilder()
    builder.set_spout("users", user_spout)
    builder.set_spout("orders", order_spout)
    joiner = (
        JoinBolt("users", "userId")
        .join("orders", "userId", "users")
        .select("userId,name,orders:orderId,price")
        .with_tumbling_window(Count(len(USERS) + len(ORDERS)))
    )
    builder.set_bolt("joiner", joiner).fields_grouping("users", Fields("userId")).fields_grouping(
        "orders", Fields("userId")
    )
    builder.set_bolt("sink", sink).shuffle_grouping("joiner")
    return builder.create_topology(), user_spout, order_spout


#: users inner join orders: each user (in order) with each of its orders (in order).
USER_ORDERS = [
    [user_id, name, order_id, price]
    for user_id, name, _ in USERS
    for order_id, buyer, _, price in ORDERS
    if buyer == user_id
]


@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_a_count_window_joins_two_spouts(engine: Engine) -> None:
    """The window holds the two spouts' tuples interleaved in any order: the results
    are in the users' order, each user's orders in theirs."""
    sink = CapturingBolt()
    topology, user_spout, order_spout = users_orders_topology(sink)
    with engine.running(topology, name="join") as run:
        run.wait_until(lambda: len(sink.values()) == len(USER_ORDERS), engine.timeout)
        # Spark reports a task's metrics after its micro-batch.
        run.wait_until(lambda: "windows_fired" in run.info().components["joiner"].custom, 10)
        custom = run.info().components["joiner"].custom
    assert sink.values() == USER_ORDERS
    assert USER_ORDERS[:2] == [[2, "harsha", 11, 7], [2, "harsha", 12, 3]]
    assert custom["windows_fired"] == 1
    assert user_spout.failed == [] and order_spout.failed == []


def test_results_are_anchored_to_the_joined_tuples_only() -> None:
    """The sink fails the first result, harsha's first order: only user 2 (msg id 1) and
    order 11 (msg id 0) fail; the window's other tuples do not."""
    sink = CapturingBolt(fail_first=1)
    topology, user_spout, order_spout = users_orders_topology(sink)
    with LocalCluster() as cluster:
        cluster.submit_topology("anchors", {}, topology)
        wait_until(lambda: len(sink.values()) == len(USER_ORDERS))
        wait_until(lambda: user_spout.failed == [1] and order_spout.failed == [0])
        assert cluster.get_running("anchors").wait_idle(10.0, pending_too=False)
        cluster.kill_topology("anchors")
    assert user_spout.failed == [1] and order_spout.failed == [0]
    assert user_spout.acked == [] and order_spout.acked == []  # still in the window


def test_by_stream_three_inputs_from_one_spout_on_an_output_stream() -> None:
    """Selector STREAM: one spout emits users, stores and cities on three streams."""
    spout = FixedTupleSpout(
        {"users": USERS, "stores": STORES, "cities": CITIES},
        streams={"users": USER_FIELDS, "stores": STORE_FIELDS, "cities": CITY_FIELDS},
    )
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("source", spout)
    joiner = (
        JoinBolt("users", "city", selector=JoinBolt.Selector.STREAM)
        .left_join("stores", "city", "users")
        .join("cities", "cityName", "users")
        .select("name,storeName,users:city,country")
        .with_output_stream("joined")
        .with_tumbling_window(Count(len(USERS) + len(STORES) + len(CITIES)))
    )
    (
        builder.set_bolt("joiner", joiner)
        .fields_grouping("source", Fields("city"), stream="users")
        .fields_grouping("source", Fields("city"), stream="stores")
        .fields_grouping("source", Fields("cityName"), stream="cities")
    )
    builder.set_bolt("sink", sink).shuffle_grouping("joiner", "joined")
    with LocalCluster() as cluster:
        cluster.submit_topology("streams", {}, builder.create_topology())
        wait_until(lambda: len(sink.values()) == 9)
        cluster.kill_topology("streams")
    # Every user but priyank (seattle is no city of CITIES), with a store or None.
    assert sink.values("joined") == [
        ["roshan", "store1", "san jose", "US"],
        ["harsha", "store2", "santa clara", "US"],
        ["siva", "store3", "dublin", "US"],
        ["hugo", "store4", "san mateo", "US"],
        ["suresh", None, "sunnyvale", "US"],
        ["guru", None, "palo alto", "US"],
        ["arun", "store5", "bengaluru", "India"],
        ["satish", None, "mumbai", "India"],
        ["mani", "store5", "bengaluru", "India"],
    ]


def test_event_time_windows_join_within_each_window_and_ack_on_expiry() -> None:
    """Tumbling 10 ms event-time windows: gender 3 at 9 ms and age 3 at 14 ms are in
    different windows and do not meet; a left join keeps genders without an age. The
    flush tuples at 105 move the watermark (105 - lag 2) past both windows, whose tuples
    are then acked; a tuple at 50 is late, on the late stream."""
    genders, ages = FeederSpout(["id", "gender", "ts"]), FeederSpout(["id", "age", "ts"])
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("genders", genders)
    builder.set_spout("ages", ages)
    joiner = (
        JoinBolt("genders", "id")
        .left_join("ages", "id", "genders")
        .select("genders:id,gender,age,genders:ts")
        .with_tumbling_window(Duration(10))
        .with_timestamp_field("ts")
        .with_lag(Duration(2))
        .with_watermark_interval(Duration.seconds(1))
        .with_late_tuple_stream("late")
    )
    builder.set_bolt("joiner", joiner).fields_grouping("genders", Fields("id")).fields_grouping(
        "ages", Fields("id")
    )
    builder.set_bolt("sink", sink).shuffle_grouping("joiner").shuffle_grouping("joiner", "late")
    gender_rows = [
        [1, "male", 2],
        [2, "female", 4],
        [3, "male", 9],
        [3, "male", 12],
        [4, "female", 15],
    ]
    age_rows = [[1, 21, 3], [3, 23, 14], [4, 24, 18], [4, 25, 19]]
    clock = ManualClock()
    with LocalCluster(clock=clock) as cluster:
        cluster.submit_topology("event-time", {}, builder.create_topology())

        def executed() -> int:
            return cluster.get_topology_info("event-time").components["joiner"].executed

        genders.feed_many(gender_rows, [f"g{n}" for n in range(5)])
        ages.feed_many(age_rows, [f"a{n}" for n in range(4)])
        genders.feed([99, "flush", 105], "g-flush")
        ages.feed([99, 0, 105], "a-flush")
        wait_until(lambda: executed() == 11)
        clock.advance(1000)  # the watermark: 105 - 2 = 103
        wait_until(lambda: len(sink.values()) == 6)
        genders.feed([5, "male", 50], "g-late")
        wait_until(lambda: len(sink.values("late")) == 1)
        wait_until(lambda: len(genders.acked) == 6 and len(ages.acked) == 4)
        cluster.kill_topology("event-time")
    assert sink.values("default") == [
        [1, "male", 21, 2],  # window (0, 10]
        [2, "female", None, 4],
        [3, "male", None, 9],
        [3, "male", 23, 12],  # window (10, 20]
        [4, "female", 24, 15],
        [4, "female", 25, 15],
    ]
    assert sink.values("late") == [[[5, "male", 50]]]
    assert sorted(genders.acked) == ["g-late", "g0", "g1", "g2", "g3", "g4"]
    assert sorted(ages.acked) == ["a0", "a1", "a2", "a3"]  # the flush tuples are held

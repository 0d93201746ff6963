"""`make bench`'s burst rows (bench.seen): what the planner did, read from the functions' log."""

from bench.seen import planner_did

PLANNER = '{"level":"INFO","message":"%s","service":"planner"%s}'


def test_the_planners_updates_and_held_changes_are_counted_from_its_log() -> None:
    log = "\n".join(
        [
            "START RequestId: 1 Version: $LATEST",
            PLANNER % ("event source change held", ',"held":"late"'),
            PLANNER % ("event source change held", ',"held":"late"'),
            PLANNER % ("event source change held", ',"held":"busy"'),
            PLANNER % ("event source changed", ""),
            '{"level":"INFO","message":"event source changed","service":"caller"}',
        ]
    )

    assert planner_did(log) == "1 sent; held: 1 busy, 2 late"
    assert planner_did("") == "0 sent"

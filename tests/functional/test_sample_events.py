"""The samples of `events/` (what `sam local invoke -e` sends) do not expire: the wake they ask for
lies ahead, and the moments they carry are of one morning, as the events of one wake would be."""

import json
from datetime import UTC, datetime, timedelta

from sample_events import EVENTS, PUT_WAKE, load_event

from wakeup.times import now, parse_at

# Ahead by this much at least, so that this test fails long before the sample's wake passes (a past
# `at` is stored as now: `sam local invoke` with it would mean "wake now").
NOTICE = timedelta(days=5 * 365)


def test_the_sample_wake_lies_years_ahead() -> None:
    at = parse_at(json.loads(load_event(PUT_WAKE)["body"])["at"])
    assert at > now() + NOTICE


def _moments() -> dict[str, datetime]:
    """Each moment a sample carries (when API Gateway received it, when SQS got it, when EventBridge
    fired), by where it stands."""
    found: dict[str, datetime] = {}
    for path in sorted(EVENTS.glob("*.json")):
        event = json.loads(path.read_text())
        if "timeEpoch" in event.get("requestContext", {}):
            found[path.name] = datetime.fromtimestamp(event["requestContext"]["timeEpoch"] / 1000, UTC)
        for n, record in enumerate(event.get("Records", [])):
            for name in ("SentTimestamp", "ApproximateFirstReceiveTimestamp"):
                found[f"{path.name} record {n} {name}"] = datetime.fromtimestamp(
                    int(record["attributes"][name]) / 1000, UTC
                )
        if event.get("detail-type") == "Scheduled Event":
            found[path.name] = datetime.fromisoformat(event["time"])
    return found


def test_the_samples_moments_are_of_one_morning() -> None:
    moments = _moments()
    assert {"api_put_wake.json", "sqs_caller_batch.json record 0 SentTimestamp", "sweeper_tick.json"} <= set(moments)
    first = min(moments.values())
    assert {name: at for name, at in moments.items() if at - first > timedelta(hours=12)} == {}

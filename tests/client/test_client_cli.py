"""The ``wakeup`` CLI, run in-process against the fake: parsing, output for people and ``--json``,
errors on one line, exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from support.moments import year_ahead
from wakeup_client import InstanceClient, WakeupClient, mint_instance_token
from wakeup_client.cli import main
from wakeup_client.testing import FakeWakeupService

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
HOST = "http://127.0.0.1:9/host"


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


class Cli:
    """``wakeup`` against a fake, with WAKEUP_URL and WAKEUP_ACCOUNT_TOKEN set as a user would."""

    def __init__(self, fake: FakeWakeupService, capsys: pytest.CaptureFixture[str]) -> None:
        self.fake = fake
        self._capsys = capsys

    def __call__(self, *argv: str) -> Ran:
        code = main(list(argv), session=self.fake.session())
        captured = self._capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    def account(self) -> WakeupClient:
        return WakeupClient(self.fake.url, self.fake.account_token, session=self.fake.session())


@pytest.fixture
def fake() -> FakeWakeupService:
    return FakeWakeupService()


@pytest.fixture
def wakeup(fake: FakeWakeupService, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("WAKEUP_URL", fake.url)
    monkeypatch.setenv("WAKEUP_ACCOUNT_TOKEN", fake.account_token)
    monkeypatch.delenv("WAKEUP_TOKEN", raising=False)
    return Cli(fake, capsys)


def assert_one_line_error(ran: Ran, code: int, *words: str) -> None:
    assert ran.code == code
    assert ran.out == ""
    assert ran.err.count("\n") == 1 and ran.err.startswith("wakeup-client: error: ")
    for word in words:
        assert word in ran.err


# --- instances register --------------------------------------------------------------------------


def test_register_with_mint_prints_the_id_and_the_new_token(wakeup: Cli) -> None:
    ran = wakeup("instances", "register", HOST, "--mint")

    assert ran.code == 0
    instance_id = re.search(UUID, ran.out)
    token = re.search(r"swi_[A-Za-z0-9_-]{43}", ran.out)
    assert instance_id and token
    instance = wakeup.account().get(instance_id.group())
    assert instance is not None and instance.url == HOST
    # The printed token is the instance's: it can ask for a wake.
    InstanceClient(wakeup.fake.url, token.group(), session=wakeup.fake.session()).wake_in(60)


def test_register_with_mint_as_json(wakeup: Cli) -> None:
    ran = wakeup("instances", "register", HOST, "--mint", "--json")

    found = ran.json()
    assert ran.code == 0
    assert set(found) == {"id", "created", "token"}
    assert re.fullmatch(UUID, found["id"]) and found["created"] is True
    assert found["token"].startswith("swi_")


def test_register_with_a_token_twice_says_it_was_registered_already(wakeup: Cli) -> None:
    token = mint_instance_token()
    first = wakeup("--json", "instances", "register", HOST, "--token", token).json()

    again = wakeup("instances", "register", HOST, "--token", token)

    assert again.code == 0
    assert first["id"] in again.out and "registered already" in again.out
    assert token not in again.out


def test_register_takes_the_token_from_the_environment(wakeup: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    token = mint_instance_token()
    monkeypatch.setenv("WAKEUP_TOKEN", token)

    found = wakeup("instances", "register", HOST, "--json").json()

    assert found == {"id": found["id"], "created": True}
    assert wakeup("instances", "register", HOST, "--token", token, "--json").json()["id"] == found["id"]


def test_register_without_a_token_is_a_usage_error(wakeup: Cli) -> None:
    assert_one_line_error(wakeup("instances", "register", HOST), 2, "--mint", "WAKEUP_TOKEN")


def test_register_with_both_token_and_mint_is_a_usage_error(wakeup: Cli) -> None:
    assert_one_line_error(wakeup("instances", "register", HOST, "--mint", "--token", mint_instance_token()), 2)


def test_register_refused_by_the_service_fails_with_its_reason(wakeup: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    token = mint_instance_token()
    wakeup.account().register(HOST, token)
    monkeypatch.setenv("WAKEUP_ACCOUNT_TOKEN", wakeup.fake.mint_account())

    ran = wakeup("instances", "register", HOST, "--token", token)

    assert_one_line_error(ran, 1, "another account")


# --- instances show / delete / list ----------------------------------------------------------------


def test_show_describes_the_instance_for_a_person(wakeup: Cli) -> None:
    token = mint_instance_token()
    instance_id = wakeup.account().register(HOST, token).id
    year = year_ahead()
    InstanceClient(wakeup.fake.url, token, session=wakeup.fake.session()).wake_at(
        datetime(year, 1, 2, 3, 4, 5, tzinfo=UTC)
    )

    ran = wakeup("instances", "show", instance_id)

    assert ran.code == 0
    assert instance_id in ran.out and HOST in ran.out
    assert f"{year}-01-02T03:04:05.000Z" in ran.out and "pending" in ran.out


def test_show_as_json_is_the_services_shape(wakeup: Cli) -> None:
    instance_id = wakeup.account().register(HOST, mint_instance_token()).id

    ran = wakeup("instances", "show", instance_id, "--json")

    assert ran.json() == {
        "id": instance_id,
        "url": HOST,
        "at": None,
        "calledAt": None,
        "attempts": 0,
        "lastError": None,
    }


def test_show_says_when_the_host_was_called(wakeup: Cli) -> None:
    token = mint_instance_token()
    instance_id = wakeup.account().register(HOST, token).id
    year = year_ahead()
    at = datetime(year, 1, 2, 3, 4, 5, tzinfo=UTC)
    InstanceClient(wakeup.fake.url, token, session=wakeup.fake.session()).wake_at(at)
    wakeup.fake.record_answer(wakeup.fake.due(at)[0], 200, when=at + timedelta(milliseconds=120))

    ran = wakeup("instances", "show", instance_id)

    assert f"called at {year}-01-02T03:04:05.120Z" in ran.out


def test_show_of_an_unknown_instance_fails(wakeup: Cli) -> None:
    assert_one_line_error(wakeup("instances", "show", "0b8e5f6c-2d7a-4f1e-9c3b-5a6d7e8f9a0b"), 1, "no instance")


def test_delete_deletes_and_deleting_again_is_fine(wakeup: Cli) -> None:
    instance_id = wakeup.account().register(HOST, mint_instance_token()).id

    first = wakeup("instances", "delete", instance_id)
    again = wakeup("instances", "delete", instance_id, "--json")

    assert (first.code, again.code) == (0, 0)
    assert "deleted" in first.out
    assert again.json() == {"id": instance_id, "deleted": False}
    assert wakeup.account().get(instance_id) is None


def test_list_prints_every_instance(wakeup: Cli) -> None:
    ids = [wakeup.account().register(f"{HOST}/{n}", mint_instance_token()).id for n in range(3)]

    ran = wakeup("instances", "list")
    as_json = wakeup("instances", "list", "--json").json()

    assert ran.code == 0
    assert [line.split()[0] for line in ran.out.splitlines()] == ids
    assert [instance["id"] for instance in as_json] == ids


def test_list_of_no_instances(wakeup: Cli) -> None:
    assert wakeup("instances", "list").out == "no instances\n"
    assert wakeup("instances", "list", "--json").json() == []


# --- wake ----------------------------------------------------------------------------------------------


@pytest.fixture
def instance_token(wakeup: Cli) -> str:
    token = mint_instance_token()
    wakeup.account().register(HOST, token)
    return token


def test_wake_at_registers_that_time(wakeup: Cli, instance_token: str) -> None:
    year = year_ahead()
    ran = wakeup("wake", "--at", f"{year}-01-02T04:04:05+01:00", "--token", instance_token, "--json")

    assert ran.code == 0
    assert ran.json() == {"at": f"{year}-01-02T03:04:05.000Z"}
    assert [w.at for w in wakeup.fake.due(datetime(year + 1, 1, 1, tzinfo=UTC))] == [
        datetime(year, 1, 2, 3, 4, 5, tzinfo=UTC)
    ]


def test_wake_show_reads_the_hosts_own_wake(wakeup: Cli, instance_token: str) -> None:
    before = wakeup("wake", "--show", "--token", instance_token)
    year = year_ahead()
    wakeup("wake", "--at", f"{year}-01-02T03:04:05Z", "--token", instance_token)

    shown = wakeup("wake", "--show", "--token", instance_token, "--json")

    assert (before.code, before.out) == (0, "no wake registered\n")
    assert shown.code == 0
    assert shown.json() == {"at": f"{year}-01-02T03:04:05.000Z", "calledAt": None, "attempts": 0, "lastError": None}


@pytest.mark.parametrize("duration, seconds", [("90", 90), ("90s", 90), ("5m", 300), ("1h30m", 5400), ("2d", 172800)])
def test_wake_in_registers_now_plus_the_duration(
    wakeup: Cli, instance_token: str, monkeypatch: pytest.MonkeyPatch, duration: str, seconds: int
) -> None:
    monkeypatch.setenv("WAKEUP_TOKEN", instance_token)
    now = datetime.now(UTC)
    before = now.replace(microsecond=now.microsecond // 1000 * 1000)  # `at` is sent to the millisecond

    ran = wakeup("wake", "--in", duration)

    after = datetime.now(UTC)
    assert ran.code == 0 and ran.out.startswith("wake registered for ")
    (due,) = wakeup.fake.due(after + timedelta(seconds=seconds + 1))
    assert before + timedelta(seconds=seconds) <= due.at <= after + timedelta(seconds=seconds, milliseconds=1)


@pytest.mark.parametrize(
    "argv",
    [
        ["wake"],
        ["wake", "--at", "2099-01-02T03:04:05", "--token", "swi_x"],
        ["wake", "--at", "2099-02-30T03:04:05Z"],
        ["wake", "--in", "soon"],
        ["wake", "--in", "5m", "--at", "2099-01-02T03:04:05Z"],
        [],
        ["instances"],
        ["instances", "show"],
        ["instances", "rename", "x"],
        ["--timeout", "fast", "instances", "list"],
    ],
)
def test_a_wrong_command_line_is_a_usage_error_on_one_line(wakeup: Cli, argv: list[str]) -> None:
    assert_one_line_error(wakeup(*argv), 2, "--help")


def test_wake_without_an_instance_token_is_a_usage_error(wakeup: Cli) -> None:
    assert_one_line_error(wakeup("wake", "--in", "5m"), 2, "WAKEUP_TOKEN")


def test_a_missing_service_url_is_a_usage_error(wakeup: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAKEUP_URL")

    assert_one_line_error(wakeup("instances", "list"), 2, "WAKEUP_URL")


def test_the_url_option_wins_over_the_environment(wakeup: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAKEUP_URL", "http://127.0.0.1:9")

    assert wakeup("instances", "list", "--url", wakeup.fake.url).code == 0
    assert wakeup("--url", wakeup.fake.url, "instances", "list").code == 0


def test_an_unreachable_service_fails_on_one_line(
    wakeup: Cli, monkeypatch: pytest.MonkeyPatch, closed_port_url: str
) -> None:
    monkeypatch.setenv("WAKEUP_URL", closed_port_url)

    assert_one_line_error(wakeup("instances", "list", "--timeout", "2"), 1, "connection refused")


def test_help_exits_zero(wakeup: Cli) -> None:
    with pytest.raises(SystemExit) as exited:
        wakeup("--help")

    assert exited.value.code == 0


def test_attempts_lists_an_instances_calls_newest_first(wakeup: Cli, fake: FakeWakeupService) -> None:
    account = wakeup.account()
    token = mint_instance_token()
    instance_id = account.register("http://127.0.0.1:9/h", token).id
    InstanceClient(fake.url, token, session=fake.session()).wake_at(datetime(2020, 1, 1, tzinfo=UTC))
    [due] = fake.due()
    fake.record_answer(due, error="connection refused")

    shown = wakeup("instances", "attempts", instance_id)
    as_json = wakeup("--json", "instances", "attempts", instance_id)

    assert shown.code == 0 and "call 1" in shown.out and "connection refused" in shown.out
    assert [call["error"] for call in as_json.json()] == ["connection refused"]


LISTS_A_LONG_PAGE = """
import os, sys
from wakeup_client import WakeupClient, mint_instance_token
from wakeup_client.cli import main
from wakeup_client.testing import FakeWakeupService
fake = FakeWakeupService()
account = WakeupClient(fake.url, fake.account_token, session=fake.session())
for _ in range(100):
    account.register("http://127.0.0.1:9/host", mint_instance_token())
os.environ.update(WAKEUP_URL=fake.url, WAKEUP_ACCOUNT_TOKEN=fake.account_token)
sys.exit(main(["--json", "instances", "list"], session=fake.session()))
"""


def test_a_reader_that_goes_away_ends_the_output_without_a_traceback() -> None:
    # given: `wakeup-client --json instances list | head -1`, the reader gone before the CLI writes its
    # 100 instances (it closes at once, while the CLI is still registering them in its fake)
    process = subprocess.Popen(
        [sys.executable, "-c", LISTS_A_LONG_PAGE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    process.stdout.close()

    # when
    _, err = process.communicate(timeout=60)

    # then: it stops quietly, as command-line tools do when the pipe closes
    assert err == ""
    assert process.returncode == 1

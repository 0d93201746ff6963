"""The functions' settings, read from the environment once per cold start.

Each handler module reads them when it is imported, so a function whose settings break a rule
fails its init with the reason (Lambda reports it as an init error) instead of answering 500 to
every request. The local stack checks the same rules before it starts (`wakeup_local.stack`), and
`template.yaml` refuses them at deploy time (its parameters' ranges and `Rules`; a test keeps the
three in step).
"""

import functools
import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from wakeup.addresses import AddressPolicy, parse_networks, parse_ports
from wakeup.arrival import SQS_MAX_DELAY_S
from wakeup.deadlines import CALLER_TIMEOUT_S, longest_call_s, shortest_lease_s

# Scheduler fires within its minute; a lead beyond two minutes only wastes the SQS delay after it.
MAX_SCHEDULE_LEAD_S = 120
# An account's requests are counted on one item, and one partition takes 1,000 write units a second
# ("Understanding DynamoDB warm throughput in different scenarios", DynamoDB developer guide:
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html):
# half of it leaves room for the write each execution environment's first refusal of a window costs.
MAX_ACCOUNT_REQUESTS_PER_S = 500


class SettingsError(ValueError):
    """Raised when the environment's settings break a rule; the message names each variable and why."""


class Settings(BaseModel):
    """What `template.yaml` (or the local stack) sets in every function's environment."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    table: str = Field(alias="WAKEUP_TABLE", min_length=1)
    queue_url: str = Field("", alias="WAKEUP_QUEUE_URL")
    schedule_group: str = Field("", alias="WAKEUP_SCHEDULE_GROUP")
    caller_arn: str = Field("", alias="WAKEUP_CALLER_ARN")
    scheduler_role_arn: str = Field("", alias="WAKEUP_SCHEDULER_ROLE_ARN")
    schedules_dlq_arn: str = Field("", alias="WAKEUP_SCHEDULES_DLQ_ARN")
    # Wakes due within the horizon go straight to SQS; SQS delays at most 900 s.
    sqs_horizon_s: int = Field(840, alias="WAKEUP_SQS_HORIZON_S", ge=1, le=SQS_MAX_DELAY_S)
    # Scheduler fires anywhere within its minute, so a schedule is set this much before `at`: 90 s
    # leaves 30 s past the minute for a cold start and the re-arm (docs/scaling.md). 0 would fire
    # within the minute after `at`, late by up to 60 s, so it is refused.
    schedule_lead_s: int = Field(90, alias="WAKEUP_SCHEDULE_LEAD_S", ge=1, le=MAX_SCHEDULE_LEAD_S)
    call_timeout_s: float = Field(10.0, alias="WAKEUP_CALL_TIMEOUT_S", gt=0, le=60)
    claim_lease_s: float = Field(30.0, alias="WAKEUP_CLAIM_LEASE_S", gt=0)
    # The sweeper re-arms a pending wake this long overdue with no live claim (its trigger was lost).
    sweep_grace_s: int = Field(30, alias="WAKEUP_SWEEP_GRACE_S", ge=0)
    # The Secrets Manager secret (ARN or name) holding the master key each account's signing
    # secret is derived from; the caller does not start without it (wakeup.factories).
    master_key_secret: str = Field("", alias="WAKEUP_MASTER_KEY_SECRET")
    # 0: retry for as long as the registration stands.
    max_wake_age_s: int = Field(0, alias="WAKEUP_MAX_WAKE_AGE_S", ge=0)
    # Per-account limits: instances an account may hold (wakeup-admin sets an account's own), and
    # wakes an instance may register per window (a looping host must not cost the operator).
    max_instances_per_account: int = Field(10_000, alias="WAKEUP_MAX_INSTANCES_PER_ACCOUNT", ge=1)
    max_wakes_per_window: int = Field(60, alias="WAKEUP_MAX_WAKES_PER_WINDOW", ge=1)
    wake_window_s: int = Field(60, alias="WAKEUP_WAKE_WINDOW_S", ge=1, le=86_400)
    # Requests a second an account may send on the account routes (wakeup-admin sets an account's
    # own): its count's item takes at most a partition's 1,000 writes a second (wakeup.logic.rates).
    account_requests_per_s: int = Field(100, alias="WAKEUP_ACCOUNT_REQUESTS_PER_S", ge=1, le=MAX_ACCOUNT_REQUESTS_PER_S)
    # Where the caller calls: only global addresses (wakeup.addresses), less the ranges denied here,
    # plus those allowed back (the local stack allows loopback); HTTPS only, and only these ports
    # (comma-separated, ranges as 8000-8999), when the operator narrows them. The defaults call
    # http and https on any port.
    call_denied_cidrs: str = Field("", alias="WAKEUP_CALL_DENIED_CIDRS")
    call_allowed_cidrs: str = Field("", alias="WAKEUP_CALL_ALLOWED_CIDRS")
    call_https_only: bool = Field(False, alias="WAKEUP_CALL_HTTPS_ONLY")
    call_allowed_ports: str = Field("", alias="WAKEUP_CALL_ALLOWED_PORTS")

    @field_validator("call_denied_cidrs", "call_allowed_cidrs")
    @classmethod
    def _cidrs(cls, value: str) -> str:
        parse_networks(value)  # a ValueError names the range that is not one
        return value

    @field_validator("call_allowed_ports")
    @classmethod
    def _ports(cls, value: str) -> str:
        parse_ports(value)  # a ValueError names the port that is not one
        return value

    @functools.cached_property
    def address_policy(self) -> AddressPolicy:
        """Where the caller may call, from the four settings above."""
        return AddressPolicy.of(
            self.call_denied_cidrs, self.call_allowed_cidrs, self.call_https_only, self.call_allowed_ports
        )

    @model_validator(mode="after")
    def _consistent(self) -> "Settings":
        if self.schedule_lead_s >= self.sqs_horizon_s:
            raise ValueError(
                f"WAKEUP_SCHEDULE_LEAD_S ({self.schedule_lead_s}) must be less than "
                f"WAKEUP_SQS_HORIZON_S ({self.sqs_horizon_s})"
            )
        if self.call_timeout_s > longest_call_s():
            raise ValueError(
                f"WAKEUP_CALL_TIMEOUT_S ({self.call_timeout_s:g}) must be at most {longest_call_s():g} s: the "
                f"caller's {CALLER_TIMEOUT_S:g} s hold the claim's write, the call and its outcome's write"
            )
        if self.claim_lease_s < shortest_lease_s(self.call_timeout_s):
            spare = shortest_lease_s(self.call_timeout_s) - self.call_timeout_s
            raise ValueError(
                f"WAKEUP_CLAIM_LEASE_S ({self.claim_lease_s:g}) must be at least WAKEUP_CALL_TIMEOUT_S "
                f"({self.call_timeout_s:g}) plus {spare:g} s: a claim's lease outlasts its call, the "
                "first attempt of the outcome's write, the requests before the call and a margin for "
                "the clocks"
            )
        return self


def load_settings(environ: Mapping[str, str]) -> Settings:
    """The settings in `environ`, or `SettingsError` saying which variables break which rule."""
    try:
        return Settings.model_validate(dict(environ))
    except ValidationError as exc:
        raise SettingsError(describe(exc)) from None


def describe(exc: ValidationError) -> str:
    """pydantic's findings as one line per variable: `WAKEUP_X='0': must be ...`."""
    problems = []
    for error in exc.errors(include_url=False):
        message = error["msg"].removeprefix("Value error, ")
        if error["loc"]:
            value = f"={error['input']!r}" if error["type"] != "missing" else ""
            problems.append(f"{error['loc'][0]}{value}: {message}")
        else:
            problems.append(message)
    return "invalid settings: " + "; ".join(problems)


@functools.cache
def get_settings() -> Settings:
    """The settings from the environment; tests call `get_settings.cache_clear()` to re-read."""
    return load_settings(os.environ)

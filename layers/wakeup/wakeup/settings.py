"""The functions' settings, read from the environment once per cold start."""

import functools
import os

from pydantic import BaseModel, ConfigDict, Field, model_validator

SQS_MAX_DELAY_S = 900


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
    # Scheduler fires anywhere within its minute, so a schedule is set this much before `at`.
    schedule_lead_s: int = Field(60, alias="WAKEUP_SCHEDULE_LEAD_S", ge=0)
    call_timeout_s: float = Field(10.0, alias="WAKEUP_CALL_TIMEOUT_S", gt=0, le=60)
    claim_lease_s: float = Field(30.0, alias="WAKEUP_CLAIM_LEASE_S", gt=0)
    # The sweeper re-arms a pending wake this long overdue with no live claim (its trigger was lost).
    sweep_grace_s: int = Field(30, alias="WAKEUP_SWEEP_GRACE_S", ge=0)
    # 0: retry for as long as the registration stands.
    max_wake_age_s: int = Field(0, alias="WAKEUP_MAX_WAKE_AGE_S", ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> "Settings":
        if self.schedule_lead_s >= self.sqs_horizon_s:
            raise ValueError("WAKEUP_SCHEDULE_LEAD_S must be less than WAKEUP_SQS_HORIZON_S")
        if self.claim_lease_s <= self.call_timeout_s:
            raise ValueError("WAKEUP_CLAIM_LEASE_S must be longer than WAKEUP_CALL_TIMEOUT_S")
        return self


@functools.cache
def get_settings() -> Settings:
    """The settings from the environment; tests call `get_settings.cache_clear()` to re-read."""
    return Settings.model_validate(dict(os.environ))

"""What the functions' modules log at a cold start, beside their own lines."""

import logging

import boto3
import pytest

import wakeup.observability  # noqa: F401  # every handler imports it at its init


def test_botocore_logs_nothing_below_a_warning_when_a_function_makes_its_clients(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given the root logger at INFO, as Lambda's runtime sets it for the application log level
    # (template.yaml's LogLevel), and credentials in the environment, as Lambda gives them
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    caplog.set_level(logging.INFO)
    # when a function makes a client, as on its first use
    boto3.session.Session().client("sqs", region_name="us-east-1")
    # then botocore said nothing (it logs where it found the credentials and the endpoint at INFO)
    assert [record.getMessage() for record in caplog.records if record.name.startswith("botocore")] == []

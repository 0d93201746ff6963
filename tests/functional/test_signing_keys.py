"""The caller's signing keys: the master key read from Secrets Manager (moto) once for a batch's calls."""

import threading
from typing import Any

from moto_env import Deployed

from wakeup.factories import signing_keys

CALLS_AT_ONCE = 16


def test_a_batchs_calls_signing_at_once_read_the_master_key_once_between_them(resources: Deployed) -> None:
    # A batch's calls run in threads of their own: on a cold start they all need the master key at
    # the same moment, and each read is a Secrets Manager request (charged, and a round trip).
    client = resources.clients.secretsmanager
    reads: list[str] = []

    def count(**_: Any) -> None:
        reads.append("GetSecretValue")

    client.meta.events.register("before-call.secrets-manager.GetSecretValue", count)
    try:
        keys = signing_keys(resources.settings.master_key_secret, client)
        start = threading.Barrier(CALLS_AT_ONCE)
        derived: list[bytes] = []

        def sign() -> None:
            start.wait()
            derived.extend(keys.keys("account-1", [1]))

        threads = [threading.Thread(target=sign) for _ in range(CALLS_AT_ONCE)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        client.meta.events.unregister("before-call.secrets-manager.GetSecretValue", count)
    assert len(derived) == CALLS_AT_ONCE and len(set(derived)) == 1
    assert reads == ["GetSecretValue"]

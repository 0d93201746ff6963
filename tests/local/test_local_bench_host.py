"""The benchmark's host (`bench.workload.Host`): many callers at once, each answered as its own."""

from concurrent.futures import ThreadPoolExecutor

import requests

from bench.workload import FLAKY, Host


def test_the_bench_host_answers_each_of_many_concurrent_callers_and_records_its_calls() -> None:
    with Host() as host:
        paths = [f"/h{index}" for index in range(200)]
        with ThreadPoolExecutor(32) as callers:
            statuses = list(
                callers.map(lambda path: requests.get(f"{host.url}{path}/wake", timeout=10).status_code, paths)
            )
        assert statuses == [200] * len(paths)
        assert sorted(host.calls) == sorted(paths) and all(len(host.calls[path]) == 1 for path in paths)
        # a flaky host's path answers 503 to its first call alone
        flaky = f"{FLAKY}one"
        assert [requests.get(f"{host.url}{flaky}/wake", timeout=10).status_code for _ in range(2)] == [503, 200]
        # what is not a wake's call is refused and not recorded
        assert requests.post(f"{host.url}/h0/wake", timeout=10).status_code == 400
        assert requests.get(f"{host.url}/h0/other", timeout=10).status_code == 400
        assert len(host.calls["/h0"]) == 1

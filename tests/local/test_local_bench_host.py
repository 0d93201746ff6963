"""The benchmark's host (`bench.workload.Host`): many callers at once, each answered as its own."""

import socket
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


def test_the_bench_host_reads_a_request_sent_in_pieces_and_outlives_callers_that_leave() -> None:
    with Host() as host:
        port = int(host.url.rpartition(":")[2])
        # a caller that leaves before its request's end, and one that connects and says nothing
        with socket.create_connection(("127.0.0.1", port)) as gone:
            gone.sendall(b"GET /gone/wa")
        silent = socket.create_connection(("127.0.0.1", port))
        # a request whose head comes a few bytes at a time
        with socket.create_connection(("127.0.0.1", port)) as slow:
            for piece in (b"GET /slow", b"/wake HTTP/1.1\r\nHost: h", b"\r\n", b"\r\n"):
                slow.sendall(piece)
            assert slow.recv(1024).startswith(b"HTTP/1.1 200 ")
        # and one whose head does not end within the host's bound (exactly that many bytes: the host
        # closes once it answers, and unread bytes would make its close a reset)
        with socket.create_connection(("127.0.0.1", port)) as endless:
            line = b"GET /endless/wake HTTP/1.1\r\nX: "
            endless.sendall(line + b"x" * (16 * 1024 - len(line)))
            assert endless.recv(1024).startswith(b"HTTP/1.1 400 ")
        silent.close()
        assert requests.get(f"{host.url}/after/wake", timeout=10).status_code == 200
        assert sorted(host.calls) == ["/after", "/slow"]

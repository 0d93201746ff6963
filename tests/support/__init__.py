"""Helpers the tests share: a scriptable host, the HTTP API client, the local stack in a process."""

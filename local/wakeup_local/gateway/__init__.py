"""API Gateway's HTTP API in front of the template's functions: its routes, payload format 2.0, and
its route throttling."""

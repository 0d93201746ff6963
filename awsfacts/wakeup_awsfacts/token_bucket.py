"""The token bucket, the rate limit AWS documents for its services, on whichever clock is given.

A bucket holds at most `capacity` tokens and gains `rate` a second; a request takes its tokens or
is refused ("Throttle requests to your HTTP APIs", API Gateway developer guide: "the token bucket
algorithm, where a token counts for a request"). The same rule holds API Gateway's route and account
limits, Lambda's scaling rate, Scheduler's invocations and DynamoDB's throughput, in the local stack
(real time) and the simulator (virtual time): each call is given the time it happens at, so the
bucket keeps no clock of its own and never reads one.
"""


class TokenBucket:
    """`capacity` tokens at most, refilled at `rate` a second; full at `now`, when it is made."""

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate, self.capacity = rate, capacity
        self.tokens, self.updated = capacity, now

    def take(self, amount: float, now: float) -> bool:
        """Takes `amount` tokens if they are there: whether the request may pass."""
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= amount:
            self.tokens -= amount
            return True
        return False

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until `amount` tokens are there (0: they may be taken now); takes none."""
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        return max(0.0, (amount - self.tokens) / self.rate)

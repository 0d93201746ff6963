"""When a wake's trigger arrives, and when its call is made: the timing of a wake, in one place.

A near wake's trigger is an SQS message delayed by whole seconds (`queue_delay_s`), a far wake's a
one-time schedule (`wakeup.triggers`); either comes a little before the wake's time, and the caller
waits out the rest itself after its claim (`wakeup.logic.delivery`), then calls once its own clock
reads the time plus the clocks' error.
"""

import math

# SQS's longest delay for a message: 15 minutes ("DelaySeconds", SendMessage, Amazon SQS API
# reference: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html).
SQS_MAX_DELAY_S = 900
# A message arrives this many whole seconds (and a fraction) before its time, not just the fraction
# that whole-second delays leave: at a busy second, receiving it, invoking the caller and claiming
# the registration all happen before the time, which the caller then waits out.
QUEUE_LEAD_S = 1
# A schedule's time must be safely in the future when it is created: AWS refuses `at()` in the
# past, and one a moment away could pass before the request lands.
SCHEDULE_SAFETY_S = 2
# A trigger arriving more than this before its time is armed again rather than waited for by the
# caller; one armed through SQS arrives up to QUEUE_LEAD_S and a second early (delays are whole seconds).
EARLY_REARM_S = float(QUEUE_LEAD_S + 1)
# How far an execution environment's clock may be ahead of the true time, at most. AWS documents no
# bound for Lambda's clock; Lambda runs on EC2, whose Amazon Time Sync Service keeps an instance's
# clock within a millisecond or two of UTC ("Set the time for your EC2 instance", EC2 user guide:
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/set-time.html): an assumption, five times
# that (docs/faults.md, "Clocks"). The caller calls once its own clock reads a wake's time plus
# this, so that a clock this far ahead still calls no earlier than the wake's time; the fault
# matrix skews each environment's clock by up to this, either way.
CLOCK_ERROR_S = 0.010


def queue_delay_s(wait_s: float) -> int:
    """The delay of a message sent `wait_s` before its time: whole seconds, QUEUE_LEAD_S and a
    fraction short of the wait, within what SQS allows."""
    return min(max(math.floor(wait_s) - QUEUE_LEAD_S, 0), SQS_MAX_DELAY_S)

"""`python -m wakeup_calibrate` (`make calibrate`): measures the local stack, runs its bursts there
and in the simulator, and prints both (a few minutes)."""

import sys

from wakeup_calibrate.calibrate import main

if __name__ == "__main__":
    sys.exit(main())

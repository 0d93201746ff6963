"""wakeup: the service that wakes stopped hosts on time (the code shared by every function)."""

__version__ = "0.1.0"

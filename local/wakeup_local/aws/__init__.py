"""The AWS services the functions call, on this machine: moto in a process of its own, fixed where
the stack needs it, served on loopback, its requests counted; the stack's own clients, and the
template's tables, queues and schedule groups created in it."""

"""`make calibrate`: the simulator (`wakeup_sim`) against the local stack (`wakeup_local`) on this
machine (docs/scaling.md, "Calibration").

- `local_profile`: measures the local stack's profile, in the simulator's terms.
- `local_trace`: the local stack's process, with each SQS batch's timeline kept.
- `timeline`: each wake's timeline, stage by stage, on both sides.
- `calibrate`: the same bursts on both sides, printed side by side.
"""

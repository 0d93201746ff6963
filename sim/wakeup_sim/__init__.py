"""A simulation of the deployed service at AWS's scale, driving the service's own delivery code.

See docs/scaling.md for the model, its sources and what it shows; `make simulate` runs it.
"""

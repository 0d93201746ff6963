"""The cost model: AWS's prices and what a wake's usage comes to (`cost`), and the Markdown tables
and percentiles its reports print (`stats`).

Beneath both its users, the simulator (`wakeup_sim`) and the benchmark (`bench`): it imports neither,
so each can price what it measured or simulated without the other (import-linter holds this,
pyproject.toml's `[tool.importlinter]`).
"""

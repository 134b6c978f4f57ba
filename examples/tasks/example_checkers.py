"""Checkers for the bundled example task file (trusted Python: called as f(task, answer))."""

import re


def percent_30(task, answer):
    """1.0 when the reply's last number is 30, 0.5 when it is within 1 of 30, else 0.0."""
    nums = re.findall(r"-?\d+(?:\.\d+)?", answer.replace(",", ""))
    if not nums:
        return 0.0
    x = float(nums[-1])
    return 1.0 if abs(x - 30) < 1e-9 else (0.5 if abs(x - 30) <= 1 else 0.0)

"""A custom reward for verl (seed 003): exact-match on GSM8K's final answer.

verl loads it by path (custom_reward_function.path / .name) and its naive reward manager calls
compute_score(data_source, solution_str, ground_truth, extra_info) for every response.
"""

from __future__ import annotations

import re

ANSWER = re.compile(r"####\s*(-?[\d,.]+)")


def extract(text: str) -> str | None:
    found = ANSWER.findall(text)
    return found[-1].replace(",", "").rstrip(".") if found else None


def compute_score(
    *, data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: object
) -> float:
    answer = extract(solution_str)
    if answer is None:
        return 0.0
    return 1.0 if answer == str(ground_truth).replace(",", "").strip() else 0.1  # 0.1 for the right format

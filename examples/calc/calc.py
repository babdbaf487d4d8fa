"""A tiny calculator with one bug for the agent to find."""


def add(a: int, b: int) -> int:
    return a - b


def multiply(a: int, b: int) -> int:
    return a * b

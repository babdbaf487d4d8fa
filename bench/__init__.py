"""Benchmarks of logos and sandboxd against the baselines they must beat.

`python -m bench` runs every family side by side in one process and prints one table; see
bench/README.md for what each number means and the targets.
"""

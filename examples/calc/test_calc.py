"""Run with `python3 test_calc.py`: exit 0 when the calculator is right."""

from calc import add, multiply

assert add(2, 3) == 5, f"add(2, 3) is {add(2, 3)}, expected 5"
assert multiply(4, 5) == 20, f"multiply(4, 5) is {multiply(4, 5)}, expected 20"
print("all good")

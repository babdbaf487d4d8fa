"""`python -m sandboxd ...`: the same as the `sandboxd` command."""

import sys

from sandboxd.cli import main

if __name__ == "__main__":
    sys.exit(main())

"""`python -m sandboxd ...`: the same as the `sandboxd` command."""

import sys

from sandboxd.cli import main

sys.exit(main())

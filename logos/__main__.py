"""`python -m logos`: the `logos` command."""

from logos.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())

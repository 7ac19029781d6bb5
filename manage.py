#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import sys


def main() -> None:
    from guidepost.cli import flows_option, run_django, use_flows_dir

    flows = flows_option(sys.argv)
    if flows is not None:
        try:
            use_flows_dir(flows)  # before Django reads its settings
        except ValueError as exc:
            sys.exit(str(exc))
    run_django(sys.argv)


if __name__ == "__main__":
    main()

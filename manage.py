#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import sys


def main() -> None:
    from guidepost.cli import flows_option, run_django, use_flows_dir, use_listening_address
    from guidepost.rundir import run_directory

    flows = flows_option(sys.argv)
    if flows is not None:
        try:
            use_flows_dir(flows)  # before Django reads its settings
        except ValueError as exc:
            sys.exit(str(exc))
    serving = "serve" in sys.argv[1:2]
    if serving:
        use_listening_address(sys.argv)  # before Django reads its settings
        with run_directory():  # before Django starts (guidepost/rundir.py says why)
            run_django(sys.argv)
    else:
        run_django(sys.argv)


if __name__ == "__main__":
    main()

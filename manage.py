#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import sys


def main() -> None:
    from guidepost.cli import flows_option, option_value, run_django, use_flows_dir, use_host

    flows = flows_option(sys.argv)
    if flows is not None:
        try:
            use_flows_dir(flows)  # before Django reads its settings
        except ValueError as exc:
            sys.exit(str(exc))
    host = option_value(sys.argv, "--host")
    if host is not None and "serve" in sys.argv[1:2]:
        use_host(host)  # before Django reads its settings
    run_django(sys.argv)


if __name__ == "__main__":
    main()

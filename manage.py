#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    from guidepost.cli import flows_option, use_flows_dir

    flows = flows_option(sys.argv)
    if flows is not None:
        try:
            use_flows_dir(flows)  # before Django reads its settings
        except ValueError as exc:
            sys.exit(str(exc))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "guidepost.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()

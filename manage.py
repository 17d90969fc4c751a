#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taproot_site.settings")
    from django.core.management import execute_from_command_line

    from taproot_site.env import settings_or_exit

    settings_or_exit()

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()

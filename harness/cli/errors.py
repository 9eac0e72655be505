"""The error a subcommand raises for bad user input: printed without a traceback, exit 2."""

from packcheck.harness.errors import InputError


class UsageError(InputError):
    pass

"""The error a subcommand raises for bad user input: printed without a traceback, exit 2."""


class UsageError(Exception):
    pass

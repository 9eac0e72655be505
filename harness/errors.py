"""The error of bad input, from a user or from a file (an argument, a results file, a golden): the
CLI prints its message as one line and exits 2, never with a traceback. The bottom floor: every part
may raise it."""


class InputError(Exception):
    """Bad input; the message names what is wrong and how to fix it."""

"""The error a malformed Case or contract value raises: it names the field and the fix."""


class ContractError(ValueError):
    """A Case, sample or layout breaks the contract; the message says which field and how to fix it."""

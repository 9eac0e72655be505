"""Text from outside packcheck (engine names, notes, exception messages), made safe to print, to
write as UTF-8 and to render: lone surrogates and control characters escaped, length bounded.

The bottom floor (docs/architecture.md): standard library only.
"""

from __future__ import annotations

import hashlib
import re

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # keeps \t and \n
LINE_BREAKS = re.compile(r"[\t\n\x85\u2028\u2029]")  # also break a line where a one-line text is printed
LONG = 20_000  # characters kept of a message; a traceback is far shorter, a hostile string may be megabytes


def safe_text(value: object, limit: int = LONG) -> str:
    """`value` as text that encodes as UTF-8 and prints on one terminal line per line."""
    text = value if isinstance(value, str) else repr(value)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # lone surrogates -> \udXXX
    text = CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit} more characters)"
    return text


def safe_line(value: object, limit: int = LONG) -> str:
    """safe_text on one line: also escapes newlines and tabs, so that a name printed at the start of a log
    line (an engine's name) cannot begin a line of its own, such as a forged PASS."""
    text = safe_text(value, limit)
    return LINE_BREAKS.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


def path_name(name: str, limit: int = 80) -> str:
    """`name` as one path component: letters, digits, '.', '_' and '-' only, never '', '.' or '..',
    at most `limit` characters (a longer or changed name keeps a digest of the original, so two
    names never share a directory)."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "_", name).lstrip(".") or "_"
    if clean == name and len(clean) <= limit:
        return clean
    digest = hashlib.sha1(name.encode("utf-8", "backslashreplace")).hexdigest()[:8]
    return f"{clean[:limit - 9]}-{digest}"

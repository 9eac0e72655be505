"""A launch's processes confined by the operating system: a mount namespace in which the folders the harness names are
read-only and only the launch's own folder is writable. The warden of the launch (harness/launch/warden.py) enters it
before it forks the agent, so the agent, the ranks and everything they start are inside; the harness and the zygote are
not. What is made read-only, and why: harness/launch/protected.py; what an engine can still reach: docs/isolation.md.

    said = enter({"mode": "auto", "device": "cpu", "read_only": [...], "writable": "/.../launch-0"})
    # "mount namespace" | "user and mount namespace" | "off" | a sentence saying why not, starting "not confined"

How, in order (Python 3.11 has no os.unshare: libc through ctypes):
1. unshare(CLONE_NEWNS), which needs CAP_SYS_ADMIN (root outside a locked-down container). Where it is refused, on a
   CPU launch, unshare(CLONE_NEWUSER | CLONE_NEWNS) with the user and group mapped to themselves (by a forked helper:
   _unshare_user), which needs unprivileged user namespaces and a single-threaded caller (a fresh fork of the zygote
   is one, before anything sets torch's thread count). Not on a GPU launch:
   the harness opens the rank's CUDA IPC handles, which a user namespace between them may refuse; a mount namespace
   changes no device, socket or /dev/shm.
2. Every mount made private, so that nothing done here reaches the host's namespace.
3. Each read-only folder bound onto itself (with its submounts) and remounted read-only.
4. The writable folder bound onto itself again, on top, and remounted writable (a bind copies its source's read-only
   flag, so the remount is needed).
A remount keeps the flags the folder's mount already had (nosuid, nodev, noexec, the atime ones): a user namespace may
not drop them. Any failure undoes the mounts made and leaves the launch unconfined with the reason; a launch is never
failed by this. "mode": "auto" (the default), "userns" (skip step 1's first call: tests of the user-namespace path),
"off" (nothing: tests of detection alone), from PACKCHECK_CONFINE (harness/launch/protected.py).
"""

from __future__ import annotations

import ctypes
import errno
import os

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
# flags a remount must keep (a user namespace may not clear them): statvfs's ST_* bits are the same as mount's MS_*
KEPT = os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC | os.ST_NOATIME | os.ST_NODIRATIME | os.ST_RELATIME
MNT_DETACH = 2
NEEDS = ("needs CAP_SYS_ADMIN (root outside a locked-down container) or, on a CPU launch, unprivileged user namespaces "
         "(Docker's default seccomp profile and Ubuntu's kernel.apparmor_restrict_unprivileged_userns refuse them)")

_libc = None


def _call(name: str, *args) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if getattr(_libc, name)(*args) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{name}: {os.strerror(code)} ({errno.errorcode.get(code, code)})")


def _mount(source: str | None, target: str, flags: int) -> None:
    _call("mount", None if source is None else source.encode(), target.encode(), None, ctypes.c_ulong(flags), None)


def _remount(target: str, flags: int) -> None:
    _mount(None, target, MS_REMOUNT | MS_BIND | flags | (os.statvfs(target).f_flag & KEPT))


def _unshare_user() -> None:
    """unshare(CLONE_NEWUSER | CLONE_NEWNS), this process's user and group mapped to themselves by a forked helper that
    stays in the parent namespace: a map that names uid 0 must be written with CAP_SETFCAP there (Linux 5.12 on), which
    this process no longer has once it has unshared. setgroups is denied first, as an unprivileged gid_map needs."""
    uid, gid, me = os.getuid(), os.getgid(), os.getpid()
    wait_read, wait_write = os.pipe()
    helper = os.fork()
    if helper == 0:
        os.close(wait_write)
        status = 1
        try:
            if os.read(wait_read, 1):  # a byte: unshared (EOF: it failed, nothing to map)
                for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"), ("gid_map", f"{gid} {gid} 1")):
                    with open(f"/proc/{me}/{name}", "w") as handle:
                        handle.write(text)
                status = 0
        finally:
            os._exit(status)
    os.close(wait_read)
    try:
        _call("unshare", CLONE_NEWUSER | CLONE_NEWNS)
        os.write(wait_write, b"u")
    finally:
        os.close(wait_write)
        _, status = os.waitpid(helper, 0)
    if status != 0:
        raise OSError(errno.EPERM, "writing the user namespace's uid and gid maps was refused")


def _unshare(mode: str, device: str) -> str:
    """Enter a mount namespace (and a user namespace where needed): which, or OSError with the last refusal."""
    if mode != "userns":
        try:
            _call("unshare", CLONE_NEWNS)
            return "mount namespace"
        except OSError:
            if device != "cpu":
                raise
    _unshare_user()
    return "user and mount namespace"


def enter(plan: dict) -> str:
    """Confine this process and all it will start as `plan` says; how it is confined, or why not (see above)."""
    if plan.get("mode") == "off":
        return "off"
    made: list[str] = []
    try:
        how = _unshare(plan.get("mode", "auto"), plan.get("device", "cpu"))
        _mount(None, "/", MS_REC | MS_PRIVATE)
        for folder in plan["read_only"]:
            _mount(folder, folder, MS_BIND | MS_REC)
            made.append(folder)
            _remount(folder, MS_RDONLY)
        writable = plan["writable"]
        _mount(writable, writable, MS_BIND)
        made.append(writable)
        _remount(writable, 0)
        os.chdir(os.getcwd())  # the working directory is looked up again: through the mounts just made
        return how
    except OSError as err:
        for folder in reversed(made):
            try:
                _call("umount2", folder.encode(), MNT_DETACH)
            except OSError:
                pass
        return f"not confined: {err.strerror or err}; {NEEDS}"

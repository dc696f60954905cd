"""libmunge through ctypes: encode and decode MUNGE credentials without starting a process.

Standard library only, and cheap to import (ctypes costs ~5 ms; the library is opened on first
use). ``load()`` returns None where ``libmunge.so.2`` is missing: callers then use the
``munge``/``unmunge`` commands (``tenants.munge_command``).
"""

from __future__ import annotations

import ctypes
import threading

from tenants.credential import Decoded

LIBRARY = "libmunge.so.2"  # by soname: ctypes.util.find_library would run ldconfig (tens of ms)

# munge_opt_t (munge.h)
_OPT_TTL = 4
_OPT_ENCODE_TIME = 6
_OPT_SOCKET = 8

_lock = threading.Lock()
_loaded: list[LibMunge | None] = []


class LibMunge:
    """LibMunge wraps the few libmunge calls metasched needs, with a fresh context per call (thread-safe)."""

    def __init__(self, lib: ctypes.CDLL, libc: ctypes.CDLL) -> None:
        self._lib = lib
        self._free = libc.free
        self._free.argtypes = [ctypes.c_void_p]
        self._free.restype = None
        lib.munge_ctx_create.restype = ctypes.c_void_p
        lib.munge_ctx_create.argtypes = []
        lib.munge_ctx_destroy.restype = None
        lib.munge_ctx_destroy.argtypes = [ctypes.c_void_p]
        # variadic: only the fixed arguments are typed; the option value is passed as a ctypes object
        lib.munge_ctx_set.restype = ctypes.c_int
        lib.munge_ctx_set.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.munge_ctx_get.restype = ctypes.c_int
        lib.munge_ctx_get.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.munge_ctx_strerror.restype = ctypes.c_char_p
        lib.munge_ctx_strerror.argtypes = [ctypes.c_void_p]
        lib.munge_strerror.restype = ctypes.c_char_p
        lib.munge_strerror.argtypes = [ctypes.c_int]
        lib.munge_encode.restype = ctypes.c_int
        lib.munge_encode.argtypes = [
            ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
        ]
        lib.munge_decode.restype = ctypes.c_int
        lib.munge_decode.argtypes = [
            ctypes.c_char_p,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_uint32),
            ctypes.POINTER(ctypes.c_uint32),
        ]

    def encode(self, payload: bytes, socket: str | None = None, ttl: int | None = None) -> str:
        """encode asks munged for a credential over ``payload``; raises OSError with munged's reason."""
        ctx = self._context(socket)
        try:
            if ttl is not None:
                self._set(ctx, _OPT_TTL, ctypes.c_int(ttl))
            cred = ctypes.c_void_p()
            status = self._lib.munge_encode(ctypes.byref(cred), ctx, payload, len(payload))
            try:
                if status != 0:
                    raise OSError(f"munge: {self._error(ctx, status)}")
                return ctypes.string_at(cred).decode("ascii")
            finally:
                if cred.value:
                    self._free(cred)
        finally:
            self._lib.munge_ctx_destroy(ctx)

    def decode(self, credential: str, socket: str | None = None) -> Decoded:
        """decode asks munged to verify a credential; a failure is in ``status``, never raised."""
        ctx = self._context(socket)
        try:
            buf = ctypes.c_void_p()
            length = ctypes.c_int(0)
            uid = ctypes.c_uint32(0)
            gid = ctypes.c_uint32(0)
            status = self._lib.munge_decode(
                credential.encode("ascii", "replace"),
                ctx,
                ctypes.byref(buf),
                ctypes.byref(length),
                ctypes.byref(uid),
                ctypes.byref(gid),
            )
            try:
                payload = ctypes.string_at(buf, length.value) if buf.value and length.value > 0 else b""
            finally:
                if buf.value:
                    self._free(buf)  # set even for some failures (expired, replayed)
            encode_time = ctypes.c_long(0)
            ttl = ctypes.c_int(0)
            if status == 0:
                self._lib.munge_ctx_get(ctx, _OPT_ENCODE_TIME, ctypes.byref(encode_time))
                self._lib.munge_ctx_get(ctx, _OPT_TTL, ctypes.byref(ttl))
            return Decoded(
                status=status,
                uid=uid.value,
                gid=gid.value,
                payload=payload,
                encode_time=encode_time.value,
                ttl=ttl.value,
                message="" if status == 0 else self._error(ctx, status),
            )
        finally:
            self._lib.munge_ctx_destroy(ctx)

    def _context(self, socket: str | None) -> int:
        """_context creates a munge context, pointed at ``socket`` when given."""
        ctx = self._lib.munge_ctx_create()
        if not ctx:
            raise MemoryError("munge_ctx_create failed")
        if socket:
            try:
                self._set(ctx, _OPT_SOCKET, ctypes.c_char_p(socket.encode()))
            except OSError:
                self._lib.munge_ctx_destroy(ctx)
                raise
        return ctx

    def _set(self, ctx: int, option: int, value: object) -> None:
        """_set sets one context option, raising OSError when libmunge refuses it."""
        status = self._lib.munge_ctx_set(ctx, option, value)
        if status != 0:
            raise OSError(f"munge_ctx_set({option}): {self._error(ctx, status)}")

    def _error(self, ctx: int, status: int) -> str:
        """_error is the context's own message (it names the socket), else the generic one."""
        text = self._lib.munge_ctx_strerror(ctx) or self._lib.munge_strerror(status) or b"error"
        return text.decode(errors="replace")


def load() -> LibMunge | None:
    """load opens libmunge once per process; None when the library is not installed."""
    with _lock:
        if not _loaded:
            try:
                _loaded.append(LibMunge(ctypes.CDLL(LIBRARY), ctypes.CDLL(None)))
            except (OSError, AttributeError):
                _loaded.append(None)
        return _loaded[0]

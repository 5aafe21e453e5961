"""Reserved ranges of a device's VMM pool (gmr/vmm_pool_range.h) as Python
objects: gmr.serving.reserve() makes them; this module holds the class.

Standard library and ctypes; PyTorch only for Range.tensor().
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any, Dict, Iterable, Optional, Tuple

from gmr import _capi, _lib

__all__ = ["Range"]


def _raise_failure(st: int, what: str, failure: _capi.FailureStruct) -> None:
    message = failure.message.decode(errors="replace")
    _lib.raise_for(st, "gmr.serving.%s: %s%s" % (what, _lib.status_name(st),
                                                 ": " + message if message else ""))


class _View:
    """The CUDA array interface of bytes of a range: what torch.as_tensor
    wraps without copying (PyTorch keeps this object alive as long as the
    tensor's storage, so the range knows whether a view is still alive)."""

    def __init__(self, ptr: int, nbytes: int, device: int) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.device = device

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False),
                "version": 3, "strides": None}


class Range:
    """Device addresses reserved in a device's pool, committed page by page.

    Made by reserve(). Addresses never move: tensors over the range (tensor())
    and CUDA graphs that use them stay valid across commits and decommits of
    other pages, and across sleep and wake. Offsets and sizes are in bytes and
    must be whole pages of the range (page_bytes).

    Usable as a context manager: leaving the block frees the range.
    """

    def __init__(self, pool: int, base: int, nbytes: int, page_bytes: int, device: int) -> None:
        self._pool = pool
        self.ptr = base
        self.nbytes = nbytes
        self.page_bytes = page_bytes
        self.device = device
        self._views: "weakref.WeakSet[_View]" = weakref.WeakSet()
        self._freed = False

    def __repr__(self) -> str:
        return ("gmr.serving.Range(ptr=%#x, nbytes=%d, page_bytes=%d, device=%d, committed=%d)"
                % (self.ptr, self.nbytes, self.page_bytes, self.device,
                   0 if self._freed else self.committed()))

    def __enter__(self) -> "Range":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()

    def _span(self, offset: int, nbytes: Optional[int], what: str) -> Tuple[int, int]:
        if self._freed:
            raise RuntimeError("gmr.serving.Range.%s: the range was freed" % what)
        if nbytes is None:
            nbytes = self.nbytes - offset
        if offset < 0 or nbytes < 0:
            raise ValueError("gmr.serving.Range.%s: offset %d and nbytes %d must be >= 0"
                             % (what, offset, nbytes))
        return self.ptr + offset, nbytes

    def _call(self, fn: str, offset: int, nbytes: Optional[int]) -> None:
        addr, n = self._span(offset, nbytes, fn)
        failure = _capi.FailureStruct()
        st = getattr(_lib.lib(), "gmr_vmm_pool_resource_" + fn)(self._pool, addr, n,
                                                               ctypes.byref(failure))
        if st != 0:
            _raise_failure(st, "Range." + fn, failure)

    def commit(self, offset: int = 0, nbytes: Optional[int] = None) -> None:
        """Commit physical memory under every page of the span not committed yet.

        Pages committed already keep their contents; new pages' contents are
        undefined. May be called during a CUDA graph capture.

        Args:
            offset: the span's start, bytes from the range's start (a page
                multiple).
            nbytes: the span's size in bytes (a page multiple; None: to the
                range's end).

        Raises:
            RuntimeError: the range was freed.
            ValueError: a negative offset or size.
            gmr.OutOfMemoryError: the device has no room (nothing committed).
            gmr.GmrError: GMR_ERR_INVALID_ARGUMENT, not whole pages or past the
                range's end; GMR_ERR_BUSY, the pool is asleep; GMR_ERR_CUDA, a
                driver call failed (nothing changed).
        """
        self._call("commit", offset, nbytes)

    def decommit(self, offset: int = 0, nbytes: Optional[int] = None) -> None:
        """Give back the physical memory of every page of the span, all committed.

        The device is synchronised first: no work still running uses a page
        when it is unmapped. The addresses stay reserved; commit them again
        later (the contents are then undefined).

        Args:
            offset: the span's start, bytes from the range's start (a page
                multiple).
            nbytes: the span's size in bytes (a page multiple; None: to the
                range's end).

        Raises:
            RuntimeError: the range was freed.
            ValueError: a negative offset or size.
            gmr.GmrError: GMR_ERR_INVALID_ARGUMENT, not whole pages, past the
                range's end, or a page not committed (nothing changed);
                GMR_ERR_BUSY, the pool is asleep; GMR_ERR_CAPTURE_UNSAFE, a
                capture refused the synchronisation; GMR_ERR_CUDA, a driver
                call failed.
        """
        self._call("decommit", offset, nbytes)

    def info(self, offset: int = 0, nbytes: Optional[int] = None) -> Dict[str, Any]:
        """What the range holds, and what of a span of it is committed.

        Args:
            offset: the span's start, bytes from the range's start.
            nbytes: the span's size in bytes (None: to the range's end).

        Returns:
            {ptr, reserved_bytes, page_bytes, committed_bytes (the whole range,
            awake or asleep), span_committed_bytes, tag (the C tag), asleep,
            saved}.

        Raises:
            RuntimeError: the range was freed.
            ValueError: a negative offset or size.
            gmr.GmrError: the pool does not know the range.
        """
        addr, n = self._span(offset, nbytes, "info")
        out = _capi.VmmRangeInfo()
        st = _lib.lib().gmr_vmm_pool_resource_get_range_info(self._pool, addr, n,
                                                              ctypes.byref(out))
        if st != 0:
            _lib.raise_for(st, "gmr.serving.Range.info: %s" % _lib.status_name(st))
        return {"ptr": out.base or 0, "reserved_bytes": out.reserved_bytes,
                "page_bytes": out.page_bytes, "committed_bytes": out.committed_bytes,
                "span_committed_bytes": out.span_committed_bytes, "tag": out.tag,
                "asleep": bool(out.asleep), "saved": bool(out.saved)}

    def committed(self, offset: int = 0, nbytes: Optional[int] = None) -> int:
        """Committed bytes of a span (the whole range by default).

        Args:
            offset: the span's start, bytes from the range's start.
            nbytes: the span's size in bytes (None: to the range's end).

        Returns:
            The committed bytes in the span.

        Raises:
            RuntimeError: the range was freed.
            gmr.GmrError: the pool does not know the range.
        """
        return int(self.info(offset, nbytes)["span_committed_bytes"])

    def tensor(self, dtype: Any = None, shape: Optional[Iterable[int]] = None,
               offset: int = 0) -> Any:
        """A PyTorch tensor over bytes of the range, without a copy.

        Its address is the range's: valid across commits and decommits of
        other pages, sleep and wake. Touch only committed pages (an
        uncommitted page is an illegal address).

        Args:
            dtype: a torch dtype (None: torch.uint8).
            shape: the tensor's shape (None: as many elements as fit from
                offset to the range's end, one dimension).
            offset: bytes from the range's start (a multiple of the dtype's
                size).

        Returns:
            A torch.Tensor on the range's device.

        Raises:
            RuntimeError: the range was freed.
            ValueError: the view does not fit in the range, or is misaligned.
            ImportError: PyTorch is not installed.
        """
        import torch  # noqa: PLC0415 (optional dependency)
        dtype = torch.uint8 if dtype is None else dtype
        itemsize = torch.empty((), dtype=dtype).element_size()
        self._span(offset, None, "tensor")
        if shape is None:
            shape = ((self.nbytes - offset) // itemsize,)
        shape = tuple(int(d) for d in shape)
        count = 1
        for d in shape:
            count *= d
        nbytes = count * itemsize
        if offset % itemsize != 0 or offset + nbytes > self.nbytes:
            raise ValueError("gmr.serving.Range.tensor: %d bytes at offset %d do not fit the "
                             "range of %d bytes (or are not aligned to %d)"
                             % (nbytes, offset, self.nbytes, itemsize))
        view = _View(self.ptr + offset, nbytes, self.device)
        self._views.add(view)
        raw = torch.as_tensor(view, device="cuda:%d" % self.device)
        return raw.view(dtype).view(shape)

    def live_views(self) -> int:
        """How many tensors made by tensor() are still alive (their storage).

        Returns:
            The number of views whose memory PyTorch still holds.
        """
        return len(self._views)

    def free(self, force: bool = False) -> None:
        """Free the range: decommit every page (the device synchronised first)
        and give the addresses back. A second free does nothing.

        Args:
            force: free even while tensors made by tensor() are alive (they
                then point at freed addresses).

        Raises:
            RuntimeError: tensors made by tensor() are still alive (drop them,
                or pass force=True).
            gmr.GmrError: GMR_ERR_CAPTURE_UNSAFE, a capture refused the
                synchronisation; GMR_ERR_CUDA, a driver call failed (the
                message says whether the range is freed all the same).
        """
        if self._freed:
            return
        if self._views and not force:
            raise RuntimeError("gmr.serving.Range.free: %d tensors over the range are alive; "
                               "drop them first (or free(force=True))" % len(self._views))
        failure = _capi.FailureStruct()
        st = _lib.lib().gmr_vmm_pool_resource_free_range(self._pool, self.ptr,
                                                          ctypes.byref(failure))
        message = failure.message.decode(errors="replace")
        if st == 0 or "all the same" in message:
            self._freed = True
        if st != 0:
            _raise_failure(st, "Range.free", failure)

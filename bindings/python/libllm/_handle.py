"""The life cycle shared by Model and Session: one native handle, freed once
by close(), `with` or garbage collection."""

from ._library import closed, library


class NativeHandle:
    """Subclasses set _KIND (for the "closed" error) and _FREE (the name of
    the library function that frees the handle) and assign self._h."""

    _KIND = "object"
    _FREE = None
    _h = None

    @property
    def handle(self):
        if self._h is None:
            raise closed(self._KIND)
        return self._h

    def close(self):
        """Free the native object. Safe from any thread, also while another
        thread runs a call on it: that call stops and the memory goes when it
        returns."""
        h, self._h = self._h, None
        if h is not None:
            getattr(library(), self._FREE)(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

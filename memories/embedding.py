"""Turning text into unit vectors for recall by meaning (SPEC §3.2).

An embedder is anything with a name, a dimension and `embed(texts)`; `TAPROOT_EMBEDDER`
chooses one: `wordllama` (the default: the wordllama package's own model, whose weights
ship inside its wheel) or `none`. Text without a single token has no vector.

Vectors are stored as float16: half the bytes of float32 on disk, in every read and in the
transfer to a worker's cache, and still far finer than the 1/1000 to which a cosine is
rounded; the cache widens them to float32 for the arithmetic.
"""

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

Vector = npt.NDArray[np.float32]
STORED_DTYPE = np.dtype("<f2")  # little-endian float16, the same bytes on every machine


class Embedder(Protocol):
    name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        """A unit vector per text, or None for a text without a token."""
        ...


def to_bytes(vector: Vector) -> bytes:
    return vector.astype(STORED_DTYPE).tobytes()


def from_bytes(data: bytes) -> Vector:
    return np.frombuffer(data, dtype=STORED_DTYPE).astype(np.float32)


def unit_rows(matrix: npt.NDArray[np.float32]) -> list[Vector | None]:
    """Each row scaled to length 1; None for a row of zeros (a text without tokens)."""
    norms = np.linalg.norm(matrix, axis=1)
    return [
        (row / norm).astype(np.float32) if norm > 0 else None
        for row, norm in zip(matrix, norms, strict=True)
    ]


class _Model(Protocol):
    def embed(self, texts: list[str], norm: bool = False) -> npt.NDArray[np.float32]: ...


class WordLlama:
    """The wordllama package's default model (256 dimensions), loaded once per process
    from the package's own folder with downloads disabled: it never opens a socket."""

    name = "wordllama-l2_supercat-256"
    dimension = 256

    def __init__(self) -> None:
        self._model: _Model | None = None
        self._lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            # The package calls logging.basicConfig() when imported, which would add a
            # handler and lower the root level under Taproot's own logging: undo that.
            root = logging.getLogger()
            handlers, level = list(root.handlers), root.level
            try:
                import wordllama
            finally:
                root.handlers[:] = handlers
                root.setLevel(level)
            folder = Path(wordllama.__file__).parent
            self._model = wordllama.WordLlama.load(
                cache_dir=folder, dim=self.dimension, disable_download=True
            )

    def model(self) -> _Model:
        self.load()
        assert self._model is not None  # load() sets it or raises
        return self._model

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        if not texts:
            return []
        # Not normalised by the model: it would divide a text without tokens by zero.
        raw = self.model().embed(list(texts), norm=False)
        return unit_rows(np.asarray(raw, dtype=np.float32))


class EmbedderUnavailable(Exception):
    """The configured embedder cannot be loaded here."""


_PROVIDERS = {"wordllama": WordLlama}
_loaded: dict[str, Embedder | None] = {}
_loading = threading.Lock()


def embedder_named(name: str) -> Embedder | None:
    """The embedder TAPROOT_EMBEDDER names, loaded once per process; None for `none`, or
    when it cannot load (said once in the log: recall then ranks by words alone)."""
    if name == "none":
        return None
    with _loading:
        if name in _loaded:
            return _loaded[name]
        provider = _PROVIDERS[name]()
        try:
            provider.load()
        except Exception as error:  # any failure to import or read the model
            logger.warning(
                "The %s embedder could not be loaded (%s): recall ranks by words alone.",
                name,
                error,
            )
            _loaded[name] = None
        else:
            _loaded[name] = provider
        return _loaded[name]

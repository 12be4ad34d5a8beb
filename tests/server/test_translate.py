"""``POST /v1/translate`` (issue #52): the whole passage comes back, line for line, and a reply
cut at max_tokens is flagged in a 200, not a 503 "provider unavailable". Real HTTP; the
model is scripted, one reply per line it is asked to translate."""

from __future__ import annotations

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from tests.server.conftest import scripted

# a passage as the index makes it: its title line, then its text
PASSAGE = ("Carolina Panthers\nThe Panthers defense gave up just 308 points, ranking sixth in the league. "
           "They also led the NFL in interceptions with 24.")
TITLE_ES = "Carolina Panthers (equipo de fútbol americano)"
TEXT_ES = ("La defensa de los Panthers solo permitió 308 puntos, sexta de la liga. También lideró la NFL en "
           "intercepciones, con 24.")


def test_the_whole_passage_is_translated(serve):
    client = serve(scripted(TITLE_ES, TEXT_ES))
    r = client.post("/v1/translate", json={"text": PASSAGE, "source_lang": "en", "target_lang": "es"})
    assert r.status_code == 200, r.text
    # the probe: the title line alone came back, and the passage was dropped without a word
    assert r.json() == {"text": f"{TITLE_ES}\n{TEXT_ES}", "source_lang": "en", "target_lang": "es",
                        "complete": True, "notes": []}


def test_a_reply_cut_at_max_tokens_is_flagged_not_a_503(serve):
    cut = AIMessage("La defensa de los Panthers solo permitió", response_metadata={"finish_reason": "length"})
    client = serve(GenericFakeChatModel(messages=iter([AIMessage(TITLE_ES), cut])))
    r = client.post("/v1/translate", json={"text": PASSAGE, "source_lang": "en", "target_lang": "es"})
    assert r.status_code == 200, r.text
    out = r.json()
    title, text = out["text"].split("\n")
    # half a translation is never shown as the whole: the line stays as it was, and the reply says so
    assert title == TITLE_ES and text == PASSAGE.split("\n")[1]
    assert out["complete"] is False
    (note,) = out["notes"]
    assert note.startswith("line 2: ") and "max_tokens" in note and "untranslated" in note


def test_the_size_limit_and_blank_lines(serve):
    client = serve(scripted(TITLE_ES, TEXT_ES))
    r = client.post("/v1/translate", json={"text": f"{PASSAGE.replace(chr(10), chr(10) * 2)}\n---\n",
                                           "source_lang": "en", "target_lang": "es"})
    assert r.status_code == 200, r.text
    assert r.json()["text"] == f"{TITLE_ES}\n\n{TEXT_ES}\n---\n"  # only lines with letters are asked
    from xlrag.server.ui import MAX_TRANSLATE_CHARS

    too_long = client.post("/v1/translate", json={"text": "x" * (MAX_TRANSLATE_CHARS + 1), "source_lang": "en",
                                                  "target_lang": "es"})
    assert too_long.status_code == 422 and too_long.json()["error"]["type"] == "invalid_request"

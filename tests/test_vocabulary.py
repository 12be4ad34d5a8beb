"""A question's fields have one owner, :class:`xlrag.schema.QueryFields`: the chain's input,
the server's requests and the LangChain retriever inherit them, the CLI's options take their
help from them, and :class:`~xlrag.schema.Query` is their validated form. A door that declares
a field of its own again (the drift of ``CitationOut.source``) fails here."""

from __future__ import annotations

import pytest
import typer

from xlrag.chains.state import ChainInput
from xlrag.cli import app
from xlrag.indexes.langchain import XlragLangChainRetriever
from xlrag.schema import Query, QueryFields, make_query
from xlrag.server.models import AskRequest, ChatRequest, RetrieveRequest

OWNED = QueryFields.model_fields


def test_query_is_the_validated_form_of_the_fields():
    assert set(OWNED) <= set(Query.model_fields)
    for name, field in OWNED.items():
        assert Query.model_fields[name].description == field.description, name
    # what the owner leaves unchecked, the query validates
    q = make_query("¿Quién controla Ceuta?", lang="ES", relevant_langs=["es", "AR", "es"])
    assert (q.lang, q.relevant_langs) == ("es", ["es", "ar"])


@pytest.mark.parametrize("door", [ChainInput, AskRequest, RetrieveRequest, XlragLangChainRetriever])
def test_every_door_inherits_the_fields(door):
    assert issubclass(door, QueryFields)
    for name, field in OWNED.items():
        got = door.model_fields[name]
        assert (got.annotation, got.default, got.description) == (field.annotation, field.default, field.description)


def test_the_chat_takes_the_language_alone_in_the_owners_words():
    assert ChatRequest.model_fields["lang"].description == OWNED["lang"].description
    assert not (set(OWNED) - {"lang"}) & set(ChatRequest.model_fields)


@pytest.mark.parametrize("door", [AskRequest, RetrieveRequest])
def test_the_openapi_schema_documents_the_owners_words(door):
    props = door.model_json_schema()["properties"]
    for name, field in OWNED.items():
        assert props[name]["description"] == field.description


@pytest.mark.parametrize("command", ["ask", "retrieve"])
def test_the_cli_options_come_from_the_owner(command):
    params = {p.name: p for p in typer.main.get_command(app).commands[command].params}
    for name, field in OWNED.items():
        assert params[name].opts == ["--" + name.replace("_", "-")], name
        assert field.description in params[name].help, name


def test_the_chain_passes_every_owned_field_on_to_the_query():
    inp = ChainInput(question="q", lang="es", relevant_langs=["ar"], target_lang="en", id="x")
    assert inp.query_fields() == {"lang": "es", "relevant_langs": ["ar"], "target_lang": "en", "id": "x"}
    assert set(ChainInput(question="q").query_fields()) == set()

"""Every xlrag error crosses a process boundary whole: a Ray worker's reaches its driver by pickle,
and an error whose ``__init__`` takes arguments of its own (15 of the 27 classes) came back as
Ray's "Failed to deserialize exception" instead of its message: a vendor embedder's missing API key
on the workers of a cluster ``xlrag index --ray-address`` joined, say."""

from __future__ import annotations

import inspect
import pickle

import pytest

import xlrag.errors as errors

# a value for each kind of constructor argument the error classes take
SAMPLES = {"str": "a-name", "int": 3, "int | None": 4, "Path | str": "/data/index", "object": 2.5,
           "list[str]": ["en", "es"], "bool": False, "str | None": "es"}


def _classes() -> list[type[BaseException]]:
    return [c for n in errors.__all__ if isinstance(c := getattr(errors, n), type) and issubclass(c, Exception)
            and not issubclass(c, Warning)]


def _instance(cls: type[BaseException]) -> BaseException:
    params = [p for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
              if p.kind is not p.VAR_POSITIONAL and p.kind is not p.VAR_KEYWORD and p.default is p.empty]
    if not params:
        return cls("what went wrong; how to fix it")
    return cls(**{p.name: SAMPLES[str(p.annotation)] for p in params})


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__name__)
def test_an_error_comes_back_from_pickle_with_its_message_and_attributes(cls):
    error = _instance(cls)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls and str(back) == str(error) and back.args == error.args
    assert vars(back) == vars(error)


def test_every_error_class_is_covered():
    # the list is the module's __all__: a new error is checked without being named here
    assert len(_classes()) >= 27 and all(issubclass(c, errors.XlragError) for c in _classes())

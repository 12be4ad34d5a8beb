"""The one exception tree of xlrag.

Every message says what went wrong *and* how to fix it; the CLI prints the
message on one line and exits non-zero.
"""

from __future__ import annotations

from pathlib import Path

from xlrag.text import capped

__all__ = [
    "CacheDamagedError",
    "ConfigError",
    "CorpusError",
    "CorpusRowError",
    "DiskFullError",
    "DocumentError",
    "EmbedderMismatchError",
    "EmptyQueryError",
    "ExecutorError",
    "IndexCorruptError",
    "IndexDirError",
    "IndexLockedError",
    "IndexNotFoundError",
    "InvalidArgumentError",
    "LanguageNotIndexedError",
    "MissingAPIKeyError",
    "MissingDependencyError",
    "OutputPathError",
    "PluginWarning",
    "PolicyError",
    "ProviderError",
    "QuestionTooLongError",
    "RunFolderBusyError",
    "TranslationCutOffError",
    "UnknownArgumentError",
    "UnknownLanguageError",
    "UnknownProviderError",
    "XlragError",
    "XlragWarning",
]


class XlragError(Exception):
    """Base class of every error xlrag raises on purpose."""

    def __reduce__(self) -> tuple[object, ...]:
        # An error crosses processes by pickle (a Ray worker's to its driver). Exception's own
        # reduce calls __init__ again with the message alone, which a subclass with arguments of its
        # own refuses: the driver then shows Ray's "Failed to deserialize exception", not the message.
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(cls: type[XlragError], args: tuple[object, ...], state: dict[str, object]) -> XlragError:
    """``cls``'s error with its message and attributes, without running its ``__init__`` again."""
    error = cls.__new__(cls, *args)  # BaseException.__new__ keeps args: the message
    error.__dict__.update(state)
    return error


class XlragWarning(UserWarning):
    """Something xlrag did on the user's behalf that they should know about (e.g. truncation)."""


class PluginWarning(XlragWarning):
    """A third-party plugin (``xlrag.plugins`` entry point) was skipped: it failed to import, or
    registered a name already taken. The message names its package."""


class InvalidArgumentError(XlragError, ValueError):
    """An argument has the wrong type or value; the message names it and what is expected."""

    def __init__(self, name: str, expected: str, got: object):
        self.name, self.expected = name, expected
        super().__init__(f"{name} must be {expected}, got {type(got).__name__} {capped(got)}")


class UnknownArgumentError(XlragError, TypeError):
    """A keyword argument the callee does not take; the message names the closest one it does.

    A TypeError too, as Python's own is: ``except TypeError`` keeps working."""


class ConfigError(XlragError):
    """The configuration is invalid."""


class UnknownProviderError(ConfigError):
    def __init__(self, kind: str, name: str, known: list[str]):
        self.kind, self.name, self.known = kind, name, known
        super().__init__(
            f"unknown {kind} {capped(name)}; choose one of: {', '.join(sorted(known))} "
            f"(or install the plugin package that provides it: an 'xlrag.plugins' entry point whose module "
            f"calls xlrag.registry.register({kind!r}, name))"
        )


class MissingAPIKeyError(ConfigError):
    def __init__(self, provider: str, env_var: str):
        self.provider, self.env_var = provider, env_var
        super().__init__(
            f"{provider} needs an API key: set the environment variable {env_var} "
            f"(keys are read only from the environment, never from config files)"
        )


class MissingDependencyError(ConfigError):
    def __init__(self, feature: str, extra: str, module: str):
        self.feature, self.extra, self.module = feature, extra, module
        super().__init__(
            f"{feature} needs the optional package {module!r}: pip install 'xlrag[{extra}]'"
        )


class UnknownLanguageError(XlragError, ValueError):
    def __init__(self, code: str, where: str = "", suggestion: str | None = None):
        self.code = code
        place = f" in {where}" if where else ""
        hint = f" (did you mean {suggestion!r}?)" if suggestion else ""
        super().__init__(
            f"unknown language code {capped(code)}{place}{hint}; use an ISO 639 code such as "
            f"'en', 'ar', 'zh' or 'zh-Hant'"
        )


class LanguageNotIndexedError(XlragError, ValueError):
    """A language asked for by name has no store in the index."""

    def __init__(self, lang: str, available: list[str], where: str = "relevant_langs"):
        self.lang, self.available = lang, available
        super().__init__(
            f"{where} names {capped(lang)}, but the index has no {capped(lang)} store (its languages: "
            f"{', '.join(available) or 'none'}); choose among those, or index passages in {capped(lang)}"
        )


class EmptyQueryError(XlragError, ValueError):
    def __init__(self, where: str = "question"):
        super().__init__(f"the {where} is empty; pass some text to search for")


class QuestionTooLongError(XlragError, ValueError):
    """A question over the configured length limit, refused before any search or model call."""

    def __init__(self, length: int, limit: int, setting: str | None = "retrieval.max_question_chars"):
        self.length, self.limit = length, limit
        fix = f"shorten it or raise {setting}" if setting else "shorten it"
        super().__init__(f"the question has {length} characters, over the limit of {limit}; {fix}")


class CorpusError(XlragError):
    """The corpus cannot be read at all (missing file, unknown format, bad mapping)."""


class CorpusRowError(CorpusError):
    def __init__(self, path: Path | str, line: int, reason: str, skippable: bool = True):
        self.path, self.line, self.reason = Path(path), line, reason
        # The --skip-bad hint only where that option exists and was not already given.
        hint = " (fix the row, or pass --skip-bad to skip malformed rows)" if skippable else " (fix the row)"
        super().__init__(f"{path}:{line}: {reason}{hint}")

    def skipped(self) -> CorpusRowError:
        """The same error as reported after --skip-bad skipped the row."""
        return CorpusRowError(self.path, self.line, self.reason, skippable=False)


class DocumentError(CorpusError):
    """A document the indexer's workers could not split or embed: named by id (an executor
    sees documents, not the corpus file's lines)."""

    def __init__(self, doc_id: str, why: str, *, more: int = 0, skippable: bool = True):
        self.doc_id, self.why, self.more = doc_id, why, more
        others = f" (and {more} more documents)" if more else ""
        hint = " (fix the row, or pass --skip-bad to skip malformed rows)" if skippable else " (fix the row)"
        super().__init__(f"document {capped(doc_id)}: {why}{others}{hint}")

    def skipped(self) -> DocumentError:
        """The same error as reported after --skip-bad skipped the row."""
        return DocumentError(self.doc_id, self.why, skippable=False)


class ExecutorError(XlragError):
    """The cluster that runs an index build cannot be reached, or lost a worker for good."""


class OutputPathError(ConfigError):
    """A path xlrag was told to write cannot take the output: a folder given for a file, a
    folder that is missing or read-only, or a file holding something other than xlrag's own
    output of that kind (refused, never truncated). See :mod:`xlrag.outputs`."""


class IndexDirError(XlragError):
    """Something is wrong with an index directory."""


class IndexNotFoundError(IndexDirError):
    def __init__(self, path: Path | str, why: str = "it has no xlrag-index.json"):
        self.path = Path(path)
        super().__init__(
            f"{path} is not an xlrag index ({why}); build one with "
            f"'xlrag index --corpus FILE --index-dir {path}'"
        )


class EmbedderMismatchError(IndexDirError):
    def __init__(self, path: Path | str, index_embedder: str, index_dim: int, embedder: str, dim: int):
        self.index_embedder, self.embedder = index_embedder, embedder
        super().__init__(
            f"index {path} was built with embedder {index_embedder!r} ({index_dim}-d) but "
            f"{embedder!r} ({dim}-d) was given; open it with --embedder matching the index, "
            f"or rebuild it into a new --index-dir"
        )


class IndexCorruptError(IndexDirError):
    """The index's files are damaged or missing: never answered as an empty result.
    ``repairable`` False: the damage took the passages with it (Chroma's database), so only a
    rebuild from the corpus helps, and the message does not send the user to ``check --repair``."""

    def __init__(self, path: Path | str, why: str, *, repairable: bool = True):
        self.path, self.why, self.repairable = Path(path), why, repairable
        rebuild = f"'xlrag index --rebuild --corpus FILE --index-dir {path}' (FILE: the corpus it was built from)"
        super().__init__(
            f"index {path} is damaged ({why}); run 'xlrag check --repair --index-dir {path}' or rebuild it with "
            f"{rebuild}" if repairable else
            f"index {path} is damaged ({why}); the passages are stored in that file, so it cannot be repaired: "
            f"rebuild it with {rebuild}"
        )


class DiskFullError(IndexDirError):
    """The disk holding the index filled up mid-write: not damage, and not lost work."""

    def __init__(self, path: Path | str, why: str):
        # ``why`` (sqlite's or Chroma's own words) is kept for a log, not shown: it says
        # "disk is full" again, or names a segment writer the user never heard of
        self.path, self.why = Path(path), why
        super().__init__(
            f"the disk holding index {path} is full; free some space on it and run the same command "
            f"again: what was written is kept, and the rest is done then"
        )


class IndexLockedError(IndexDirError):
    """Another process is writing to the index."""

    def __init__(self, path: Path | str, holder: str):
        self.path, self.holder = Path(path), holder
        super().__init__(
            f"index {path} is being written by another process ({holder}); wait for it to finish "
            f"(drop --no-wait to queue behind it), or stop that process"
        )


class RunFolderBusyError(XlragError):
    """Another run is writing to the run folder: two at once would duplicate its records."""

    def __init__(self, path: Path | str, holder: str):
        self.path, self.holder = Path(path), holder
        super().__init__(
            f"run folder {path} is being written by another run ({holder}); wait for it to finish "
            f"(rerun then: it resumes), or give this run another --out"
        )


class CacheDamagedError(XlragError):
    """A cache file (LLM replies, embeddings) cannot be read; it holds nothing that cannot be
    computed again."""

    def __init__(self, what: str, path: Path | str, why: str):
        self.what, self.path, self.why = what, Path(path), why
        super().__init__(
            f"{what} {path} is damaged ({why}); delete it and rerun: it only holds results "
            f"that are computed again"
        )


class PolicyError(XlragError, ValueError):
    """A retrieval policy cannot plan for this query (e.g. a missing target language)."""


class ProviderError(XlragError):
    """A provider (LLM, embedder, reranker) failed after its retries."""


class TranslationCutOffError(ProviderError):
    """The LLM stopped at its token limit in the middle of a translation."""

    def __init__(self, text: str, target_lang: str, max_tokens: int | None):
        limit = f"max_tokens={max_tokens}" if max_tokens else "its max_tokens"
        super().__init__(
            f"the {target_lang} translation of {capped(text, 40)} was cut off at {limit}; raise the translating "
            f"LLM's max_tokens (a passage needs about twice its own length in tokens)")

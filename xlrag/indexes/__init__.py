"""Indexing and retrieval: corpus → passages → language-tagged stores → IR-mode policies."""

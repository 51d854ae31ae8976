"""Data: examples, readers, named datasets, vocabularies and batching. Knows nothing about models."""

from structseq.data.example import Example

__all__ = ["Example"]

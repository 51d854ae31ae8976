"""Building blocks shared by every model family: attention, layers, embeddings."""

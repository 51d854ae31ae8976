"""Plain reference formulations: slow, step-by-step code a test checks the batched models against and a
benchmark times them against. Each reads a model's parameters but not its fast code paths."""

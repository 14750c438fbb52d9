"""The cost model of the simulated Ascend core: pipes, flags and launches replayed instruction by instruction."""

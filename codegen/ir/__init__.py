"""The shared layer every stage reads: the graph, op specs, data layouts, hardware profiles, Winograd math and the
optimisation log's record type. Imports nothing from the stages above it."""

"""Graph passes: fusion, lowering to op specs and weights, and the arena memory plan."""

"""Variant selection: the tiling rules, the candidate search, its cache and tuning records."""

"""Shape buckets and the generic (runtime-shaped) kernels; planned through the one pipeline."""

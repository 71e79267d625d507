"""Build, check and grade byte-level tokenizers on a real corpus split into domains."""

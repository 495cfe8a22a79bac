// Anchor for the grove shared library; the layers provide the code.

"""High-precision (mpmath) references: kernels, feature maps, attention. See ``mp.py``."""

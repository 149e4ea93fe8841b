"""Built-in registry entries. Importing this package registers every map exactly once.

One module per family of maps; add the import of a new module here. Rows are made with
``builtin_map`` of the module ``builtin`` here (or a family's constructor on top of it), which
fills in what every built-in map shares.
"""

from kernel_verify.impls.catalogue import (  # noqa: F401
    dense_exponential,
    deterministic,
    exact,
    learned,
    learned_attention,
    random_features,
    sketches,
)

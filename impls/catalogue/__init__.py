"""Built-in registry entries. Importing this package registers every map exactly once.

One module per family of maps; add the import of a new module here.
"""

from impls.catalogue import random_features  # noqa: F401

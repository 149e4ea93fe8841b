"""Deliberately broken implementations that the property suite must catch (mutation testing).

:mod:`verify.mutants.catalogue` lists them (``MUTANTS``); ``kernel-verify mutants``
(:mod:`verify.mutants.runner`) runs the suite against each one and prints the kill matrix.
Every mutant is a list of ordinary third-party targets (:mod:`verify.thirdparty.protocol`) that
*claim what the correct implementation claims*: the lie is what the suite has to catch.
"""
